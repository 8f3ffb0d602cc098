#!/bin/sh
# After the files are unpacked (deb postinst with "configure", rpm %post
# with 1 on install and 2 on upgrade). The service is not enabled here: it
# needs its database and sources first. An upgrade restarts it if it runs.
set -e

case "$1" in
	configure | 1 | 2) ;;
	*) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if systemctl is-active --quiet no8s-agent.service; then
		systemctl try-restart no8s-agent.service || true
	fi
fi

if [ "$1" = 1 ] || { [ "$1" = configure ] && [ -z "$2" ]; }; then
	cat <<'MSG'
no8s-agent is installed, not started. Set the database and sources in
/etc/no8s/no8s.yaml (secrets in /etc/no8s/no8s.env), then:
  systemctl enable --now no8s-agent
MSG
fi
exit 0

#!/bin/sh
# Before the files are removed (deb prerm, rpm %preun): stop and disable
# the service on removal ("remove", or 0 packages left), not on upgrade.
set -e

case "$1" in
	remove | 0)
		if [ -d /run/systemd/system ]; then
			systemctl disable --now no8s-agent.service >/dev/null 2>&1 || true
		fi
		;;
esac
exit 0

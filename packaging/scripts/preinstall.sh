#!/bin/sh
# Before the files are unpacked (deb preinst, rpm %pre): the system user
# and group no8s, which own /var/lib/no8s and may read /etc/no8s. Kept on
# removal, as the files they own may stay.
set -e

if ! getent group no8s >/dev/null 2>&1; then
	groupadd --system no8s
fi
if ! getent passwd no8s >/dev/null 2>&1; then
	nologin=/usr/sbin/nologin
	[ -x "$nologin" ] || nologin=/sbin/nologin
	useradd --system --gid no8s --home-dir /var/lib/no8s --no-create-home \
		--shell "$nologin" --comment "no8s-agent" no8s
fi
exit 0

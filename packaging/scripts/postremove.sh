#!/bin/sh
# After the files are removed (deb postrm, rpm %postun): systemd forgets
# the unit. The state in /var/lib/no8s, the cache and the user are kept.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0

#!/bin/sh
# @PKG@ pre-remove (deb prerm remove|upgrade, rpm %preun 0|1): on removal
# (not on an upgrade) the service stops and is disabled.
set -e
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if command -v systemctl >/dev/null 2>&1; then
	if [ -d /run/systemd/system ]; then
		systemctl stop @PKG@.service || true
	fi
	# Works without a running systemd: removes the unit's symlinks.
	systemctl --no-reload disable @PKG@.service >/dev/null 2>&1 || true
fi
exit 0

#!/bin/sh
# @PKG@ pre-remove (deb prerm remove|upgrade, rpm %preun 0|1): on removal
# (not on an upgrade) the service stops and is disabled.
set -e
# deb-systemd-invoke and deb-systemd-helper on Debian (they honour
# policy-rc.d, in chroots and image builds), systemctl elsewhere.
invoke() {
	if command -v deb-systemd-invoke >/dev/null 2>&1; then deb-systemd-invoke "$@"; else systemctl "$@"; fi
}
# An operator's `systemctl enable` makes links deb-systemd-helper does not
# track: systemctl removes them in any case.
disable() {
	if command -v deb-systemd-helper >/dev/null 2>&1; then deb-systemd-helper disable "$@" || true; fi
	systemctl --no-reload disable "$@"
}
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if command -v systemctl >/dev/null 2>&1; then
	if [ -d /run/systemd/system ]; then
		invoke stop @PKG@.service || true
	fi
	# Works without a running systemd: removes the unit's symlinks.
	disable @PKG@.service >/dev/null 2>&1 || true
fi
exit 0

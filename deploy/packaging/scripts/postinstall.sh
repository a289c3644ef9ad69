#!/bin/sh
# @PKG@ post-install (deb postinst configure [OLD-VERSION], rpm %post 1|2):
# the directories the unit and the config name, owned and moded as the unit
# expects; on an upgrade a running service restarts on the new binary.
# A fresh install does not enable or start the service: its config names
# the server and the certificates first (docs/install.md, "Packages").
set -e
# deb-systemd-invoke and deb-systemd-helper on Debian (they honour
# policy-rc.d, in chroots and image builds), systemctl elsewhere.
invoke() {
	if command -v deb-systemd-invoke >/dev/null 2>&1; then deb-systemd-invoke "$@"; else systemctl "$@"; fi
}
case "$1" in
configure | 1 | 2) ;;
*) exit 0 ;;
esac
install -d -m 0750 -o root -g plumbline /etc/plumbline @ETC_DIRS@
install -d -m @STATE_MODE@ -o plumbline -g plumbline /var/lib/@STATE_DIR@
upgrade=false
if { [ "$1" = configure ] && [ -n "$2" ]; } || [ "$1" = 2 ]; then
	upgrade=true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	if $upgrade; then
		invoke try-restart @PKG@.service || true
	fi
fi
exit 0

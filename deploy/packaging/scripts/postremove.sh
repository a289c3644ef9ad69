#!/bin/sh
# @PKG@ post-remove (deb postrm remove|purge|upgrade|..., rpm %postun 0|1).
# remove: the binary and the unit are gone; config, state and the user
# stay. purge (deb only; rpm -e is a remove): the state directory
# /var/lib/@STATE_DIR@ goes, and when no other Plumbline package is left
# (neither installed nor with its config left) the user, the group and
# /etc/plumbline (if nothing but what the packages put there is in it).
set -e
if [ "$1" = purge ]; then
	rm -rf /var/lib/@STATE_DIR@
	last=true
	for f in /usr/bin/plumbline-agent /usr/bin/plumbline-server /etc/plumbline/agent.yaml /etc/plumbline/server.yaml; do
		if [ -e "$f" ]; then
			last=false
		fi
	done
	if $last; then
		rmdir /etc/plumbline/tls 2>/dev/null || echo "@PKG@: /etc/plumbline/tls is not empty: kept" >&2
		rmdir /etc/plumbline 2>/dev/null || true
		if getent passwd plumbline >/dev/null; then
			userdel plumbline || true
		fi
		if getent group plumbline >/dev/null; then
			groupdel plumbline || true
		fi
	fi
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
exit 0

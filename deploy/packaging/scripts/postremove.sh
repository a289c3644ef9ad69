#!/bin/sh
# @PKG@ post-remove (deb postrm remove|purge|upgrade|..., rpm %postun 0|1).
# remove: the binary and the unit are gone; config, state and the user
# stay. purge (deb only; rpm -e is a remove): dpkg removes the conffile;
# this removes what the package itself made: the state directory
# /var/lib/@STATE_DIR@ and, when no other Plumbline package is left
# (neither installed nor with its config left), the directories
# /etc/plumbline/{tls,pki} and /etc/plumbline if they are empty. Files an
# operator put there (certificates, keys, tokens) are kept and named. The
# system user and group stay (Debian policy: a later user of the uid could
# own files the package left behind, so users are never removed).
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
		for d in /etc/plumbline/tls /etc/plumbline/pki /etc/plumbline; do
			if [ -d "$d" ] && ! rmdir "$d" 2>/dev/null; then
				echo "@PKG@: $d is not empty (files not made by the package): kept" >&2
			fi
		done
	fi
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
exit 0

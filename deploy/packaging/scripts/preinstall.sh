#!/bin/sh
# @PKG@ pre-install (deb preinst install|upgrade, rpm %pre): the system
# user and group plumbline, shared by plumbline-agent and plumbline-server,
# exist before the files that name the group are unpacked.
set -e
if ! getent group plumbline >/dev/null; then
	groupadd --system plumbline
fi
if ! getent passwd plumbline >/dev/null; then
	useradd --system --gid plumbline --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --comment "Plumbline" plumbline
fi
exit 0

#!/bin/sh
# Installs the Debian packages named as arguments that dpkg says are missing.
# Idempotent: with everything present it changes nothing and asks no mirror.
set -eu
missing=
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null

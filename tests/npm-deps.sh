#!/bin/sh
# Installs the pinned Pi loaders (package-lock.json) into node_modules/ with
# `npm ci`, only when node_modules is missing or older than the lock.
#
# Needs node 20.6 or later and its npm.  It never installs node itself:
# Debian 12's nodejs package is 18.x, which Pi 0.73.1 does not run on, and
# installing it would replace a newer node already at /usr/bin/node (this
# project's machines carry node 20 there).  Without a suitable node it
# stops with exit 3 and says what is needed.
#
# --ignore-scripts: the loaders kz-pi-validate calls (loadSkillsFromDir,
# discoverAndLoadExtensions) work without any package's install script; the
# three packages that have one (koffi, protobufjs, @google/genai) are parts of
# Pi's model clients that validation never loads.
set -eu
cd "$(dirname "$0")/.."
need="node 20.6 or later with its npm (Debian 12's nodejs 18 is too old for Pi; install Node 20 LTS, e.g. from NodeSource)"
if ! command -v node >/dev/null 2>&1; then
	echo "deps: node not found: need $need" >&2
	exit 3
fi
v=$(node --version 2>/dev/null || true)
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number);
	process.exit(a > 20 || (a === 20 && b >= 6) ? 0 : 1)' 2>/dev/null; then
	echo "deps: node ${v:-(unknown version)} at $(command -v node) is too old: need $need" >&2
	exit 3
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "deps: npm not found beside node $v: need $need" >&2
	exit 3
fi
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ] &&
	[ -d node_modules/@mariozechner/pi-coding-agent ]; then
	exit 0
fi
echo "deps: npm ci (pinned Pi loaders, node $v)" >&2
npm ci --ignore-scripts --no-audit --no-fund >/dev/null
touch "$stamp"

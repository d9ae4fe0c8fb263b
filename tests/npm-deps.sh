#!/bin/sh
# Installs the pinned Pi loaders (package-lock.json) into node_modules/ with
# `npm ci`, only when node_modules is missing or older than the lock.  Needs
# node and npm; installs Debian's nodejs and npm when node is absent.
#
# --ignore-scripts: the loaders kz-pi-validate calls (loadSkillsFromDir,
# discoverAndLoadExtensions) work without any package's install script; the
# three packages that have one (koffi, protobufjs, @google/genai) are parts of
# Pi's model clients that validation never loads.
set -eu
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	tests/deps.sh nodejs npm
fi
stamp=node_modules/.package-lock.json
if [ -f "$stamp" ] && [ ! package-lock.json -nt "$stamp" ] &&
	[ -d node_modules/@mariozechner/pi-coding-agent ]; then
	exit 0
fi
echo "deps: npm ci (pinned Pi loaders)" >&2
npm ci --ignore-scripts --no-audit --no-fund >/dev/null
touch "$stamp"

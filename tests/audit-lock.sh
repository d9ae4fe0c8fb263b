#!/bin/sh
# Audits package-lock.json: every installed package carries an integrity
# hash, and @mariozechner/pi-coding-agent is pinned at exactly $1 both in
# package.json and in the lock.  Exit 0 clean, 1 otherwise.
set -eu
cd "$(dirname "$0")/.."
want=${1:?usage: audit-lock.sh PI_VERSION}
command -v node >/dev/null 2>&1 || { echo "audit-lock: node not found" >&2; exit 3; }
node - "$want" <<'JS'
const fs = require("fs");
const want = process.argv[2];
const name = "@mariozechner/pi-coding-agent";
const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
const pkg = JSON.parse(fs.readFileSync("package.json", "utf8"));
const bad = [];
if (lock.lockfileVersion < 2 || !lock.packages)
	bad.push("lockfileVersion must be 2 or 3");
let n = 0;
for (const [k, v] of Object.entries(lock.packages || {})) {
	if (k === "" || v.link)
		continue;
	n++;
	if (typeof v.integrity !== "string" || !/^sha(256|384|512)-[A-Za-z0-9+/=]+$/.test(v.integrity))
		bad.push(`${k}: no integrity hash`);
}
const dep = (pkg.dependencies || {})[name];
if (dep !== want)
	bad.push(`package.json pins ${name} at ${JSON.stringify(dep)}, want exactly ${want}`);
const root = (lock.packages || {})[""] || {};
if (((root.dependencies || {})[name]) !== want)
	bad.push(`lock root requires ${name} ${JSON.stringify((root.dependencies || {})[name])}, want ${want}`);
const got = ((lock.packages || {})["node_modules/" + name] || {}).version;
if (got !== want)
	bad.push(`lock resolves ${name} to ${JSON.stringify(got)}, want ${want}`);
for (const b of bad)
	console.error("audit-lock: " + b);
if (bad.length)
	process.exit(1);
console.log(`audit-lock: ${n} packages, all with integrity; ${name} ${want}`);
JS

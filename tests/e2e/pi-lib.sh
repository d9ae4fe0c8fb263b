# Shared set-up for the kz-pi-validate tests (sourced after lib.sh): a
# field key, a workspace, the default required isolation mode (the real
# kz-sandbox of this tree), and helpers.
[ -d "$TOP/node_modules/@mariozechner/pi-coding-agent" ] || "$TOP/tests/npm-deps.sh"
head -c 32 /dev/urandom >"$T/field.key"
chmod 0600 "$T/field.key"
export KZ_FIELD_KEY_FILE=$T/field.key KZ_PI_SANDBOX=required
# The child's uid, this file's own (4 per pid of this shell, above
# kz-pkgrun's tool uids): leftovers() counts that uid's processes, and
# another file's validations running at once (make e2e runs two files at
# a time) would be counted as this one's.
export KZ_PI_UID=$((2108000000 + ($$ % 32768) * 4))
unset KZ_CONFIG KZ_SANDBOX_BIN KZ_PI_MODULES KZ_PI_CHILD KZ_PI_NODE
# The child script and the Pi loaders are read by path inside kz-sandbox,
# whose root view shows /usr and nothing of /tmp, /root, /home, /var: a source
# tree checked out there is invisible to the child.  Stage them where an
# installation puts them (under /usr/local), as hard links when the
# filesystem allows, and remove them at exit.
PI_STAGE=$(mktemp -d /usr/local/lib/kz-pi-e2e.XXXXXX)
on_exit "rm -rf '$PI_STAGE'"
chmod 0755 "$PI_STAGE"
cp "$TOP/cmd/kz-pi-validate/child.mjs" "$PI_STAGE/child.mjs"
cp -al "$TOP/node_modules" "$PI_STAGE/node_modules" 2>/dev/null ||
	{ rm -rf "$PI_STAGE/node_modules"; cp -a "$TOP/node_modules" "$PI_STAGE/node_modules"; }
export KZ_PI_CHILD=$PI_STAGE/child.mjs KZ_PI_MODULES=$PI_STAGE/node_modules
WS=$T/ws
mkdir -m 0755 "$WS"
FIX=$TOP/tests/pi
C1=$(printf 'contract one' | sha256sum | cut -c1-64)
C2=$(printf 'contract two' | sha256sum | cut -c1-64)
# fixture NAME: a private copy of the fixture's files in $T/NAME
fixture() { rm -rf "$T/$1"; cp -r "$FIX/$1/files" "$T/$1"; }
# pv NAME [PROFILE]: validates $T/NAME from the workspace; sets RC, OUT
pv() {
	RC=0
	(cd "$WS" && kz-pi-validate --profile "${2:-$FIX/$1/profile.json}" \
		--files "$T/$1" --contract-digest "$C1" --out "$T/$1.receipt") \
		>"$T/$1.stdout" 2>"$T/$1.stderr" || RC=$?
	OUT=$(cat "$T/$1.stderr")
}
# field NAME PY-EXPR: evaluates PY-EXPR with r = the receipt body (keys read
# as attributes too; a missing one prints undefined), printed as compact
# JSON.  python3, not node: node's start-up costs a second on a busy host.
field() {
	/usr/bin/python3 - "$T/$1.receipt" "$2" <<'PY'
import json, sys
class U:
    def __getattr__(self, k): return self
    def __getitem__(self, k): return self
class O(dict):
    def __getattr__(self, k): return self.get(k, U())
r = json.load(open(sys.argv[1]), object_hook=O)["body"]
v = eval(sys.argv[2])
print("undefined" if isinstance(v, U) else
      json.dumps(v, separators=(",", ":"), ensure_ascii=False))
PY
}
# leftovers: processes of the child uid still alive
leftovers() { pgrep -u "$KZ_PI_UID" -c node 2>/dev/null || true; }
# deps_setup: an offline npm cache holding tests/pi/dep-src, in $NPMC (in the
# stage, which kz-sandbox's root view shows), and the lock for it written
# into $T/ext-deps (npm pack makes the tarball and its hash).
deps_setup() {
	NPMC=$(mktemp -d "$PI_STAGE/npm-cache.XXXXXX")
	on_exit "rm -rf '$NPMC'"
	rm -rf "$T/dep" && cp -r "$FIX/dep-src" "$T/dep"
	(cd "$T/dep" && npm pack --silent >/dev/null 2>&1)
	npm cache add "$T/dep/kz-fixture-dep-1.0.0.tgz" --cache "$NPMC" >/dev/null 2>&1
	chmod -R a+rX "$NPMC"
	node - "$T/dep/kz-fixture-dep-1.0.0.tgz" "$T/ext-deps/package-lock.json" <<'JS'
const fs = require("fs"), crypto = require("crypto");
const [tgz, out] = process.argv.slice(2);
const integrity = "sha512-" + crypto.createHash("sha512")
	.update(fs.readFileSync(tgz)).digest("base64");
const dep = { "kz-fixture-dep": "1.0.0" };
fs.writeFileSync(out, JSON.stringify({ name: "kz-fixture-deps",
	version: "1.0.0", lockfileVersion: 3, requires: true, packages: {
	"": { name: "kz-fixture-deps", version: "1.0.0", dependencies: dep },
	"node_modules/kz-fixture-dep": { version: "1.0.0", resolved:
	"https://registry.npmjs.org/kz-fixture-dep/-/kz-fixture-dep-1.0.0.tgz",
	integrity } } }, null, 2) + "\n");
JS
}
# fake_sandbox RC LINE: a kz-sandbox that logs its call to $T/sbx.calls,
# prints LINE on stderr and exits RC without running anything
fake_sandbox() {
	printf '#!/bin/sh\necho call >>"%s/sbx.calls"\necho "%s" >&2\nexit %s\n' \
		"$T" "$2" "$1" >"$T/fake-sandbox"
	chmod 0755 "$T/fake-sandbox"
	rm -f "$T/sbx.calls"
}

#!/bin/sh
# make demo: the main job on the embedded default.  Starts the stack with
# kz-supervise in a temporary run dir, runs a small Python program in a
# sandbox with kz-run, runs it again in the same conversation (the
# workspace snapshot carries over), prints the audit records of both runs
# with kz-audit query, and stops the stack.  Run as root.
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
BIN=$TOP/bin
[ "$(id -u)" = 0 ] || { echo "demo: run as root (namespaces, cgroups)" >&2; exit 2; }
RUN=$(mktemp -d /tmp/kz-demo.XXXXXX)
chmod 0755 "$RUN"
export KZ_RUN_DIR=$RUN
# This host's fs.file-max may be the kernel's default, which a pool of
# default-size workers passes half of (kz-ctl-local(8), LEASE_FILES_SHARE).
export LEASE_FILES_SHARE=${LEASE_FILES_SHARE:-0}
# A demo that worked leaves nothing; one that failed keeps the run dir, and
# says so, for the logs it points at.
stop() {
	rc=$?
	"$BIN/kz-supervise" stop --run-dir "$RUN" >/dev/null 2>&1 || true
	if [ "$rc" = 0 ]; then
		rm -rf "$RUN"
	else
		echo "demo: failed; the logs are kept in $RUN/log (rm -rf $RUN when done)" >&2
	fi
}
trap stop EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }

say "starting the stack in $RUN"
# start returns once a worker is warm and admission is open.
eval "$("$BIN/kz-supervise" start --run-dir "$RUN")"
"$BIN/kz-lease" status
echo

cat >"$RUN/hello.py" <<'PY'
import os, platform
visits = "visits.txt"
n = int(open(visits).read()) + 1 if os.path.exists(visits) else 1
open(visits, "w").write(str(n))
print(f"hello from {platform.node() or 'the sandbox'} as uid {os.getuid()}")
print(f"workspace {os.getcwd()}: visit number {n}")
print(f"projection (read-only): {sorted(os.listdir('/projection'))}")
PY

say "run 1: kz-run --actor alice --conversation demo --file hello.py -- python3 /projection/hello.py"
"$BIN/kz-run" --actor alice --conversation demo --file "$RUN/hello.py" \
	-- python3 /projection/hello.py

say "run 2: the same actor and conversation; the workspace snapshot is restored"
"$BIN/kz-run" --actor alice --conversation demo --file "$RUN/hello.py" \
	-- python3 /projection/hello.py

# kz-reset audits after the release: give it a moment to land.
i=0
until [ "$("$BIN/kz-audit" query --dir "$RUN/audit" --kind reset | wc -l)" -ge 2 ] || [ $i -ge 50 ]; do
	sleep 0.1; i=$((i + 1))
done
say "audit records of both runs (kz-audit query --dir $RUN/audit)"
"$BIN/kz-audit" query --dir "$RUN/audit" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    e = r["event"]
    keep = {k: v for k, v in e.items() if k not in ("evidence",)}
    if "evidence" in e:
        keep["evidence"] = "all %d checks true" % len(e["evidence"]) if all(e["evidence"].values()) else e["evidence"]
    print("%4d %s %-9s %s" % (r["seq"], r["ts"], r["kind"], json.dumps(keep, separators=(",", ":"))))
'
say "the audit chain"
"$BIN/kz-audit" verify --field-key "$RUN/field.key" --dir "$RUN/audit"

say "stopping the stack"

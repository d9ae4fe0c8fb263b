#!/bin/bash
# A migration of the deployment's slot under load, the way redis-cli
# --cluster reshard does it (SETSLOT IMPORTING/MIGRATING, MIGRATE in
# batches, SETSLOT NODE), with kz-lease on a three-primary cluster and 8
# clients leasing and releasing throughout.  While the slot is half-moved
# the store client backs off (TRYAGAIN, or an ASK with keys still on the
# source); once every key is on the target it follows ASK (ASKING, then
# the script, to the importing node); after SETSLOT NODE it follows MOVED.
# The load keeps getting leases across it, no token is issued twice, no
# worker has two owners at once, and ASKING really reached the target.
. "$(dirname "$0")/lib.sh"
plan 10
. "$(dirname "$0")/cluster-lib.sh"
cluster_start $((11000 + $$ % 1300 * 3))
t "a three-primary cluster" sh -c "redis-cli -p $B cluster info | grep -q cluster_state:ok"
OWN=$(owner)
for p in $B $((B + 1)) $((B + 2)); do [ "$p" != "$OWN" ] && DST=$p; done

head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
. "$TOP/tests/unit/kz-lease/standin.sh"
standin_cleanup
export KZ_AUDIT=off KZ_RUN_DIR=$T STANDIN_CGROUP=$CG KZ_FIELD_KEY_FILE=$T/field.key
export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/standin-worker.py
# A call that waits out the half-moved window (five batches, 0.3 s apart:
# about 1.5 s, more on a loaded machine) does so within its bound, 75% of
# the store timeout (kz-lease(8)).
export LEASE_CAPACITY=3 LEASE_STORE_TIMEOUT_MS=4000 LEASE_RECONCILE_MS=300
export KZ_STORE_SOCKET=tcp:127.0.0.1:$OWN
S=$T/kz-lease.sock
bg kz-lease serve --socket "$S" 2>"$T/lease.log"
wait_sock "$S"
t "three workers warm on the cluster" wait_for warm 3
now() { date +%s.%N; }
export LOAD_STOP=$T/stop
python3 "$TOP/tests/store/load.py" clients h "$S" 8 60 "$T/load.jsonl" &
_pids="$_pids $!"; LOAD=$!
sleep 0.5
asked0=$(cli "$DST" info commandstats | sed -n 's/^cmdstat_asking:calls=\([0-9]*\).*/\1/p')
echo "start $(now)" >"$T/marks"
cli "$DST" cluster setslot "$SLOT" importing "$(id_of "$OWN")" >/dev/null
cli "$OWN" cluster setslot "$SLOT" migrating "$(id_of "$DST")" >/dev/null
# Half-moved: a fifth of the keys at a time, 0.3 s apart, so that the
# window is long enough for leases whose scripts touch only keys not yet
# moved to be granted even on a loaded machine.
n=$(cli "$OWN" cluster countkeysinslot "$SLOT")
batch=$(( (n + 4) / 5 ))
while :; do
	keys=$(cli "$OWN" cluster getkeysinslot "$SLOT" "$batch")
	[ -z "$keys" ] && break
	# shellcheck disable=SC2086
	cli "$OWN" migrate 127.0.0.1 "$DST" "" 0 5000 keys $keys >/dev/null
	sleep 0.3
done
echo "moved $(now)" >>"$T/marks"
sleep 1	# every key on the target, the slot still the source's: ASK
echo "node $(now)" >>"$T/marks"
for p in $B $((B + 1)) $((B + 2)); do cli "$p" cluster setslot "$SLOT" node "$(id_of "$DST")" >/dev/null; done
# MOVED: kz-lease reconnects to the new owner, whose run id is new, so it
# starts a new store epoch and re-establishes the pool from the inventory
# (kz-lease(8)); wait for grants to resume, 10 s at most.
t_node=$(now)
for i in $(seq 100); do
	python3 -c "import json,sys; sys.exit(0 if any(json.loads(l).get('ev')=='grant' and json.loads(l)['t']>$t_node+0.3 for l in open('$T/load.jsonl')) else 1)" 2>/dev/null && break
	sleep 0.1
done
echo "end $(now)" >>"$T/marks"
touch "$T/stop"; wait $LOAD
asked1=$(cli "$DST" info commandstats | sed -n 's/^cmdstat_asking:calls=\([0-9]*\).*/\1/p')
diag "slot $SLOT moved from $OWN to $DST ($n keys, batches of $batch); ASKING on the target: $((${asked1:-0} - ${asked0:-0}))"
t "ASKING reached the importing node" test "$((${asked1:-0} - ${asked0:-0}))" -gt 0
is "$(owner)" "$DST" "the slot now lives on the other primary"
python3 - "$T/marks" "$T/load.jsonl" "$T/lease.log" >"$T/check" <<'PY'
import datetime, json, sys
m = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1])}
ev = [json.loads(l) for l in open(sys.argv[2])]
g = [e for e in ev if e["ev"] == "grant"]
rel = {e["lease_id"]: e["t_send"] for e in ev if e["ev"] == "release"}
def res(name, ok, detail=""):
    print("%s\t%d\t%s" % (name, 0 if ok else 1, detail))
def between(a, b): return [e for e in g if m[a] <= e["t"] < m[b]]
res("leases granted while the slot was half-moved", len(between("start", "moved")) > 0,
    "%d grants" % len(between("start", "moved")))
res("leases granted in the ASK window (every key on the target)", len(between("moved", "node")) > 0,
    "%d grants" % len(between("moved", "node")))
res("leases granted after SETSLOT NODE (MOVED)", len(between("node", "end")) > 0,
    "%d grants" % len(between("node", "end")))
toks = [e["token"] for e in g]
res("no token was issued twice", len(toks) == len(set(toks)), "%d grants" % len(toks))
by = {}
for e in g:
    by.setdefault(e["worker"], []).append((e["t"], rel.get(e["lease_id"], e["expires"]), e["owner"]))
clash = 0
for w, iv in by.items():
    iv.sort()
    for a, b in zip(iv, iv[1:]):
        if b[0] < a[1] and a[2] != b[2]:
            clash += 1
res("no worker had two owners at once", clash == 0, "%d overlaps" % clash)
closed, t0 = 0.0, None
for l in open(sys.argv[3]):
    try: j = json.loads(l)
    except Exception: continue
    ts = j.get("ts")
    try: ts = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    except Exception: continue
    if ts >= m["node"]: break
    if j.get("event") == "admission.close" and ts >= m["start"]: t0 = ts
    if j.get("event") == "admission.open" and t0 is not None: closed += ts - t0; t0 = None
if t0 is not None: closed += m["node"] - t0
ref = [e for e in ev if e["ev"] == "refuse" and m["start"] <= e["t"] < m["node"]]
res("admission stayed open while the slot moved (half-moved and ASK windows)", closed == 0,
    "closed %.2f s; %d refusals, %d grants before SETSLOT NODE" % (closed, len(ref), len(between("start", "node"))))
after = [e["t"] for e in g if e["t"] >= m["node"]]
if after:
    print("#\t0\tfirst grant %.2f s after SETSLOT NODE" % (min(after) - m["node"]))
PY
while IFS=$'\t' read -r name rc detail; do
	if [ "$name" = "#" ]; then diag "$detail"; continue; fi
	ok "$rc" "$name"; [ -n "$detail" ] && diag "  $detail"
done <"$T/check"
[ -n "${KZ_TEST_KEEP:-}" ] && cp "$T"/lease.log "$T"/load.jsonl "$T"/marks "$KZ_TEST_KEEP"/
done_testing

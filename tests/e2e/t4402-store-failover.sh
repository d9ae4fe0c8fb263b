#!/bin/bash
# One pool across two hosts through primary failovers: two "hosts"
# (network namespaces) each run kz-lease with its own local controller,
# sharing one store through Sentinel (a primary, two replicas, three
# sentinels, all with ACL auth), with 32 clients per host leasing and
# releasing.  The primary is SIGKILLed mid-load, then the new primary is
# SIGSTOPped past the client timeout, then one host is cut off from the
# store.  tests/store/check.py proves from every (worker, owner, token,
# time) of both hosts: no token issued twice, no worker with two owners at
# once, no grant while no primary could be confirmed (admission closed on
# both hosts, and reopened by itself), the cut-off host granting nothing
# until healed while the other goes on, every token of an epoch the store
# held (no local allocation), a new epoch after each failover; then the
# pool converges to capacity on both hosts.
# e2e: alone (its fault windows are the sentinels' failover, timed in seconds; beside two other test files its stop window once saw no new primary)
. "$(dirname "$0")/lib.sh"
plan 20
. "$TOP/tests/store/ha.sh"
t "store: a primary, two replicas and three sentinels in namespaces" ha_up
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
. "$TOP/tests/unit/kz-lease/standin.sh"
standin_cleanup
on_exit "kill -CONT \$(cat $T/stopped 2>/dev/null) 2>/dev/null"
CAP=3
export KZ_AUDIT=off STANDIN_CGROUP=$CG KZ_FIELD_KEY_FILE=$T/field.key
export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/standin-worker.py
export LEASE_CAPACITY=$CAP LEASE_TTL_MS=3000 LEASE_STORE_TIMEOUT_MS=500 LEASE_RECONCILE_MS=500
export KZ_STORE_SOCKET=sentinel:$SENT/kzp KZ_STORE_USER=kz KZ_STORE_PASSWORD_FILE=$T/store.pass
for h in h1 h2; do
	mkdir -p "$T/$h"
	KZ_RUN_DIR=$T/$h LEASE_HOST=$h nsenter --net=/run/netns/"$NS$h" kz-lease serve --socket "$T/$h/lease.sock" \
		2>"$T/$h/lease.log" &
	_pids="$_pids $!"
done
st() { kz-lease status --socket "$T/$1/lease.sock" 2>/dev/null |
	python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])" 2>/dev/null; }
wait_for() { local i; for i in $(seq 1 ${4:-100}); do [ "$(st "$1" "$2")" = "$3" ] && return 0; sleep 0.1; done; return 1; }
wait_sock "$T/h1/lease.sock" && wait_sock "$T/h2/lease.sock"
t "host 1: $CAP workers warm through Sentinel" wait_for h1 warm $CAP
t "host 2: $CAP workers warm through Sentinel" wait_for h2 warm $CAP

LOAD=$TOP/tests/store/load.py
now() { date +%s.%N; }
wait_primary_not() { local i p; for i in $(seq 150); do p=$(primary_port); [ -n "$p" ] && [ "$p" != "$1" ] && { echo "$p"; return 0; }; sleep 0.1; done; return 1; }
# grants_after T HOST...: waits (20 s at most) until every HOST granted after T.
grants_after() { local t=$1 h i; shift; for h; do for i in $(seq 200); do
	python3 -c "import json,sys; sys.exit(0 if any(json.loads(l).get('ev')=='grant' and json.loads(l)['t']>$t for l in open('$T/$h/load.jsonl')) else 1)" 2>/dev/null && break
	sleep 0.1; done; done; }
export LOAD_STOP=$T/stop
nsenter --net=/run/netns/"${NS}h1" python3 "$LOAD" monitor "$SENT" kzp default "$T/store.pass" 120 "$T/mon.jsonl" &
_pids="$_pids $!"; MON=$!
for h in h1 h2; do
	python3 "$LOAD" clients "$h" "$T/$h/lease.sock" 32 120 "$T/$h/load.jsonl" &
	_pids="$_pids $!"; eval "LOAD_$h=$!"
done
grants_after 0 h1 h2; sleep 1
P1=$(primary_port)
echo "kill $(now)" >"$T/faults"
eval "kill -9 \$NODE_$P1"
P2=$(wait_primary_not "$P1"); diag "primary $P1 killed; $P2 promoted"
ha_node "$P1"	# back as a replica: the sentinels reconfigure it
grants_after "$(now)" h1 h2; sleep 1
eval "echo \$NODE_$P2" >"$T/stopped"
echo "stop $(now)" >>"$T/faults"
kill -STOP "$(cat "$T/stopped")"
P3=$(wait_primary_not "$P2"); diag "primary $P2 stopped; $P3 promoted"
sleep 1
echo "cont $(now)" >>"$T/faults"
kill -CONT "$(cat "$T/stopped")"
grants_after "$(now)" h1 h2; sleep 1
echo "part $(now)" >>"$T/faults"
ip -n "${NS}h2" route replace blackhole 10.77.0.0/24
sleep 4
ip -n "${NS}h2" route replace 10.77.0.0/24 via 10.77.2.1
echo "heal $(now)" >>"$T/faults"
grants_after "$(now)" h2; sleep 1
touch "$T/stop"
kill $MON
wait $LOAD_h1 $LOAD_h2
diag "faults: $(tr '\n' ' ' <"$T/faults")"
python3 "$TOP/tests/store/check.py" "$T/faults" "$T/mon.jsonl" "$T/h1/load.jsonl" "$T/h2/load.jsonl" >"$T/check" 2>&1
while IFS=$'\t' read -r name rc detail; do
	ok "$rc" "$name"; [ -n "$detail" ] && diag "  $detail"
done <"$T/check"
[ "$(wc -l <"$T/check")" = 14 ] || { diag "checker: $(cat "$T/check")"; ok 1 "the checker ran"; }
t "the pool converges to capacity on host 1" wait_for h1 warm $CAP 200
t "the pool converges to capacity on host 2" wait_for h2 warm $CAP 200
t "the password appears in no kz-lease log" sh -c "! grep -qF -- '$PW' '$T/h1/lease.log' '$T/h2/lease.log'"
[ -n "${KZ_TEST_KEEP:-}" ] && { rm -rf "$KZ_TEST_KEEP"; mkdir -p "$KZ_TEST_KEEP"; cp -r "$T"/h1 "$T"/h2 "$T"/mon.jsonl "$T"/faults "$T"/s26379 "$KZ_TEST_KEEP"/ 2>/dev/null; }
done_testing

#!/bin/bash
# Workspace snapshots you can trust, with real kz-sandbox workers: a save
# that fails (over the worker's per-archive bound, over the per-actor
# bound alone) removes the older snapshot, the status line says the
# workspace was not saved and why, and the next run starts empty instead
# of from an older workspace; the per-actor and the deployment's bounds
# evict the least recently used snapshots first (the actor's own, then
# anyone's); a snapshot unused for LEASE_SNAPSHOT_TTL_MS is never
# restored and is swept away; a run that leaves the workspace as it was
# restored keeps the snapshot it came from.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 28
# Archives are tar records of 10 KiB: a 30 KiB file makes one of 40 KiB.
export LEASE_SNAPSHOT_ACTOR_MAX=100K LEASE_SNAPSHOT_TOTAL_MAX=150K
export LEASE_SNAPSHOT_TTL_MS=90000 SANDBOX_SNAPSHOT_MAX=1M
start_stack 1
t "a real worker becomes warm" wait_for warm 1
newest() { ls -t "$T"/snapshots/*/*.tar | head -1; }
run() { wait_for warm 1; kz-run -q --actor "$1" --conversation "$2" -- sh -c "$3"; }
fill() { run "$1" "$2" 'head -c 30K /dev/urandom >f' >/dev/null 2>&1; newest; }
total() { cat "$T"/snapshots/*/*.tar 2>/dev/null | wc -c; }

# A failed save never brings back an older workspace.
run alice c1 'echo v1 >mark' >"$T/o" 2>&1
is "$(cat "$T/o")" "" "a save says nothing"
S1=$(newest)
wait_for warm 1
kz-run --actor alice --conversation c1 -- sh -c 'head -c 2M /dev/urandom >big' >"$T/o" 2>"$T/e"
is "$?" 0 "a run whose workspace is over the worker's bound still exits 0"
like "$(cat "$T/e")" "^kz-run: exit 0 \\(worker w[0-9a-f]+, [0-9]+ ms\\); the workspace was not saved: the workspace is larger than the worker's snapshot bound \\(SANDBOX_SNAPSHOT_MAX\\)$" \
	"its one status line says the workspace was not saved, and why"
tnot "the older snapshot is gone" test -e "$S1"
is "$(run alice c1 'cat mark 2>/dev/null || echo none')" none "the next run starts empty, not from the older workspace"
run alice c1 'echo v2 >mark' >/dev/null 2>&1
t "a small workspace is saved again" test -e "$S1"
run alice c1 'head -c 120K /dev/urandom >big' >"$T/o" 2>&1
like "$(cat "$T/o")" "^kz-run: the workspace was not saved: the workspace archive \\([0-9.]+K\\) is larger than the per-actor snapshot bound \\(100K\\)$" \
	"an archive over the per-actor bound alone is not saved (-q: that line only)"
tnot "and its older snapshot is gone too" test -e "$S1"
is "$(run alice c1 'cat mark 2>/dev/null || echo none')" none "the next run starts empty again"
is "$(ls "$T"/snapshots/*/ | grep -c '\.new$')" 0 "no partial file is left"

# The per-actor bound: alice's least recently used snapshot goes first.
rm -f "$T"/snapshots/*/*.tar
A1=$(fill alice c1)
is "$(stat -c %s "$A1")" 40960 "a 30K workspace is a 40K archive"
A2=$(fill alice c2)
run alice c1 'test -s f' >/dev/null 2>&1; ok $? "alice's first workspace is restored (and used again)"
A3=$(fill alice c3)
tnot "a third 40K snapshot evicts alice's least recently used one" test -e "$A2"
t "and keeps the other two" test -e "$A1" -a -e "$A3"
is "$(run alice c2 'ls -A | wc -l')" 0 "the evicted workspace starts empty"
fill alice c2 >/dev/null
tnot "saving it again evicts the next least recently used" test -e "$A1"

# The deployment's bound: anyone's least recently used goes first.
A2=$(newest)
B1=$(fill bob b1)
t "bob's first snapshot fits (alice 80K + 40K of 150K)" test -e "$B1" -a -e "$A3" -a -e "$A2"
B2=$(fill bob b2)
tnot "bob's second evicts the deployment's least recently used (alice's)" test -e "$A3"
t "and nothing else" test -e "$A2" -a -e "$B1" -a -e "$B2"
t "the snapshots hold at most 150K ($(total) bytes)" test "$(total)" -le 153600

# Expiry: a snapshot unused for longer than LEASE_SNAPSHOT_TTL_MS is never
# restored, and the periodic sweep removes one nobody asks for.
touch -d '-120 seconds' "$B1" "$B2"
is "$(run bob b1 'ls f 2>/dev/null || echo none')" none "an expired snapshot is not restored"
gone() { local i; for i in $(seq 1 400); do [ ! -e "$1" ] && return 0; sleep 0.1; done; return 1; }
t "the sweep removes an expired one nobody leased" gone "$B2"
t "and says so" grep -q '"event":"snapshot.expire"' "$T/lease.log"
t "the fresh ones stay" test -e "$A2"

# A run that changes nothing leaves the very same file (not a rewrite);
# one that changes something replaces it.
run carol k1 'echo kept >f' >/dev/null 2>&1
K=$(newest) I=$(stat -c %i "$(newest)")
is "$(run carol k1 'cat f')" kept "an unchanged workspace is restored next run"
is "$(stat -c %i "$K")" "$I" "and its snapshot was not written again"
run carol k1 'echo changed >f' >/dev/null 2>&1
is "$(run carol k1 'cat f')" changed "a changed workspace is saved over it"
done_testing

#!/bin/bash
# Snapshots under races, with real kz-sandbox workers.  Two runs of one
# conversation at once start from the same snapshot: the first to commit
# is kept, and the other is told its workspace was not saved (it never
# writes the older workspace over the newer one).  A lease taken away
# while the worker writes the save: the save is never put in place, the
# older snapshot is removed, and kz-run fails closed (exit 3).
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 13
export LEASE_TTL_MS=30000
start_stack 2
t "two real workers become warm" wait_for warm 2 300
rk() { redis-cli -s "$STORE_SOCK" "$@"; }
newest() { ls -t "$T"/snapshots/*/*.tar 2>/dev/null | head -1; }
# The .new a save writes beside the snapshot, once it has begun.
wait_new() {
	local i
	for i in $(seq 1 600); do
		ls "$T"/snapshots/*/*.new >/dev/null 2>&1 && return 0
		sleep 0.01
	done
	return 1
}

kz-run -q --actor alice --conversation c1 -- sh -c 'echo v0 >base.txt' >/dev/null 2>&1
t "the first run saves the workspace" test -n "$(newest)"
wait_for warm 2 300

# A restores, then B restores the same snapshot, finishes and commits
# first; A commits last.
kz-run --actor alice --conversation c1 -- sh -c 'sleep 3; echo A >a.txt' >"$T/oa" 2>"$T/ea" &
PA=$!
sleep 1.5
kz-run --actor alice --conversation c1 -- sh -c 'echo B >b.txt' >"$T/ob" 2>"$T/eb"
is "$?" 0 "the run that commits first exits 0"
unlike "$(cat "$T/eb")" "not saved" "and its workspace is saved"
wait "$PA"; rc=$?
is "$rc" 0 "the run that commits second exits with its code's status"
like "$(cat "$T/ea")" "the workspace was not saved: another run of this conversation saved its workspace meanwhile; that one is kept$" \
	"and is told its workspace was not saved, and why"
wait_for warm 2 300
seen=$(kz-run -q --actor alice --conversation c1 -- ls 2>&1 | tr '\n' ' ')
is "$seen" "b.txt base.txt " "the next run has the first commit's workspace, not the older-based one"
is "$(ls "$T"/snapshots/*/ | grep -c '\.new$')" 0 "no partial file is left"

# The lease is taken away while the worker writes the save: its token is
# replaced in the store by another of the same epoch (so that nothing but
# the release notices), as a release under the stolen lease id would.
wait_for warm 2 300
kz-run --actor bob --conversation b1 -- sh -c 'echo old >keep' >/dev/null 2>&1
S1=$(newest)
wait_for warm 2 300
kz-run --actor bob --conversation b1 -- sh -c 'head -c 60000000 /dev/urandom >big; echo new >keep' >"$T/oc" 2>"$T/ec" &
PC=$!
if wait_new; then
	for w in $(rk SMEMBERS 'kz:{default}:s:leased'); do
		tok=$(rk HGET "kz:{default}:w:$w" token)
		rk HSET "kz:{default}:w:$w" token "${tok%%:*}:1" >/dev/null
	done
fi
wait "$PC"; rc=$?
is "$rc" 3 "a run whose lease was taken away during the save fails closed (exit 3)"
like "$(cat "$T/ec")" "the workspace was not saved: kz-lease did not take the release" \
	"saying the workspace was not saved, and why"
tnot "the save is not put in place, and the older snapshot is gone" test -e "$S1"
t "no partial file of it is left" sh -c "! ls '$T'/snapshots/*/*.new 2>/dev/null | grep -q ."
wait_for warm 2 300
is "$(kz-run -q --actor bob --conversation b1 -- sh -c 'cat keep 2>/dev/null || echo none' 2>&1)" none \
	"the next run starts empty, not from the older workspace"
done_testing

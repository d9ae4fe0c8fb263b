#!/bin/bash
# The pool on a three-primary Redis Cluster: every key of the deployment
# has one hash tag, so every script runs in one slot; kz-lease and
# kz-reset pointed at a node that does not own the slot follow MOVED; the
# lease, release and reset (publish) scripts keep working through a
# migration of the deployment's slot to another primary (t4404 does the
# same under load and checks the ASK window).  kz-project's blob-collect
# refuses a cluster store.
. "$(dirname "$0")/lib.sh"
plan 15
. "$(dirname "$0")/cluster-lib.sh"
cluster_start $((15000 + $$ % 1300 * 3))
t "a three-primary cluster" sh -c "redis-cli -p $B cluster info | grep -q cluster_state:ok"
OWN=$(owner)
for p in $B $((B + 1)) $((B + 2)); do [ "$p" != "$OWN" ] && { OTHER=$p; break; }; done
for p in $B $((B + 1)) $((B + 2)); do [ "$p" != "$OWN" ] && [ "$p" != "$OTHER" ] && DST=$p; done
diag "slot $SLOT on $OWN; kz-lease pointed at $OTHER; migration to $DST"

head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
. "$TOP/tests/unit/kz-lease/standin.sh"
standin_cleanup
export KZ_AUDIT=off KZ_RUN_DIR=$T STANDIN_CGROUP=$CG KZ_FIELD_KEY_FILE=$T/field.key
export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/standin-worker.py
export LEASE_CAPACITY=2 LEASE_STORE_TIMEOUT_MS=500 LEASE_RECONCILE_MS=300
export KZ_STORE_SOCKET=tcp:127.0.0.1:$OTHER
S=$T/kz-lease.sock
bg kz-lease serve --socket "$S" 2>"$T/lease.log"
wait_sock "$S"
cycle() { # lease and release once
	kz-lease lease --socket "$S" --actor a --conversation c >"$T/l" 2>&1 || return 1
	kz-lease release --socket "$S" --lease-id "$(python3 -c "import json; print(json.load(open('$T/l'))['lease_id'])")" \
		--token "$(python3 -c "import json; print(json.load(open('$T/l'))['token'])")" >/dev/null 2>&1
}
t "kz-lease follows MOVED to the slot's owner: two workers warm" wait_for warm 2
t "lease and release on the cluster" cycle
t "the released worker is published warm again (reset)" wait_for warm 2
# Counting the slot and the database in two calls races the reconciler's
# writes; that every key carries the one hash tag does not.
n_own=$(cli "$OWN" --scan | wc -l)
is "$(cli "$OWN" --scan | grep -vc '^kz:{default}:')" 0 "every key of the deployment has its one hash tag ($n_own keys)"
rc_is 1 "kz-reset (the blocking client) follows MOVED too (stale_token)" \
	kz-reset --worker nosuch --token x:1

# Migrate the slot, as redis-cli --cluster reshard does, with leases going on.
( while [ ! -f "$T/mig.done" ]; do cycle; sleep 0.05; done ) >/dev/null 2>&1 &
_pids="$_pids $!"
cli "$DST" cluster setslot "$SLOT" importing "$(id_of "$OWN")" >/dev/null
cli "$OWN" cluster setslot "$SLOT" migrating "$(id_of "$DST")" >/dev/null
sleep 0.5
while :; do
	keys=$(cli "$OWN" cluster getkeysinslot "$SLOT" 50)
	[ -z "$keys" ] && break
	# shellcheck disable=SC2086
	cli "$OWN" migrate 127.0.0.1 "$DST" "" 0 5000 keys $keys >/dev/null
done
for p in $B $((B + 1)) $((B + 2)); do cli "$p" cluster setslot "$SLOT" node "$(id_of "$DST")" >/dev/null; done
touch "$T/mig.done"
is "$(owner)" "$DST" "the slot now lives on another primary"
t "the pool is warm again after the migration" wait_for warm 2 150
t "lease and release after the migration" cycle
is "$(cli "$OWN" dbsize)" 0 "nothing of the deployment is left on the old owner"
t "its keys are all on the new owner" test "$(cli "$DST" cluster countkeysinslot "$SLOT")" -gt 0

# kz-project blob-collect reads the versions with SCAN, which lists one
# node's keys: pointed at a node that does not own the slot it would see
# no version and take every old blob for unreferenced.  Against a cluster
# it refuses, and removes nothing.
export KZ_PROJECT_BLOB_DIR=$T/blobs
printf 'kept' >"$T/b.txt"
SHA=$(kz-project blob-put --file "$T/b.txt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sha256"])')
{ kz-project member-create --member m && kz-project resource-create --resource r1 --member m --kind document &&
	kz-project version-new --resource r1 --member m --path b.txt --blob "$SHA"; } >/dev/null 2>&1
ok $? "kz-project records a version on the cluster, through a node that does not own the slot"
touch -d '2 days ago' "$T/blobs/$SHA"
rc_is 1 "blob-collect against a cluster store is refused (exit 1)" kz-project blob-collect
like "$(cat "$T/.out")" "cluster store.*nothing removed" "...saying why"
t "...and the old blob the version names is still there" test -e "$T/blobs/$SHA"
done_testing

#!/bin/bash
# kz-lease against a real redis-server: lease, release, renew, fencing,
# op-id replay, an expired lease and a release under a stale token retire
# the worker (deleted, replaced under a new id, never reset for a new
# owner), admission closed while the store is gone,
# and a store that comes back without its data gets a new epoch, under
# which every old worker is retired and replaced.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
plan 30
standin_env
export LEASE_CAPACITY=2 LEASE_TTL_MS=8000 LEASE_STORE_TIMEOUT_MS=300
export LEASE_RECONCILE_MS=300 LEASE_CREATE_TIMEOUT_MS=3000
standin_serve

t "two workers become warm" wait_for warm 2
rc_is 0 "lease succeeds" kz-lease lease --socket "$S" --actor alice --conversation c1
cp "$T/.out" "$T/l1"
L1=$(field "$T/l1" lease_id) K1=$(field "$T/l1" token) W1=$(field "$T/l1" worker)
like "$K1" '^[0-9a-f]{16}:[0-9]+$' "token is epoch-qualified"
rc_is 0 "renew with the right token" kz-lease renew --socket "$S" --lease-id "$L1" --token "$K1"
rc_is 0 "second lease" kz-lease lease --socket "$S" --actor bob --conversation c1
cp "$T/.out" "$T/l2"
W2=$(field "$T/l2" worker) E2=$(field "$T/l2" endpoint)
tnot "the two leases got different workers" test "$W1" = "$W2"
rc_is 1 "third lease: no warm worker" kz-lease lease --socket "$S" --actor carol --conversation c2
like "$(cat "$T/.out")" busy "it says busy"

# A retried release (same op_id) is answered from the stored result.
OP=0123456789abcdef0123456789abcdef
req() { printf '{"v":1,"op":"release","id":"x","lease_id":"%s","token":"%s","op_id":"%s"}' "$1" "$2" "$OP"; }
python3 - "$S" "$(req "$L1" "$K1")" >"$T/r1" <<'PY'
import json, socket, struct, sys
def call(path, body):
    s = socket.socket(socket.AF_UNIX); s.connect(path)
    b = body.encode(); s.sendall(struct.pack(">I", len(b)) + b)
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    return json.loads(s.recv(n, socket.MSG_WAITALL))
print(json.dumps([call(sys.argv[1], sys.argv[2]), call(sys.argv[1], sys.argv[2])]))
PY
like "$(cat "$T/r1")" '^\[\{[^]]*"ok": true[^]]*\}, \{[^]]*"ok": true' "release and its retry both succeed"
t "the released worker comes back warm through its reset" wait_for warm 1

# Bob never releases: his lease expires and its worker is retired, never
# reset for a new owner: deleted (its endpoint gone), and a replacement
# with a new id is created.
gone() { local i; for i in $(seq 1 200); do [ ! -e "$1" ] && return 0; sleep 0.1; done; return 1; }
t "the expired lease's worker is deleted" gone "$T/workers/$W2"
tnot "its endpoint is gone with it" test -e "$E2"
t "a replacement makes the pool warm again" wait_for warm 2
tnot "the replacement has a new id" test -e "$T/workers/$W2"
grep -q "\"event\":\"lease.expire\".*\"worker\":\"$W2\"" "$T/lease.log"; ok $? "lease.expire was logged for it"
rc_is 1 "expired owner cannot release" kz-lease release --socket "$S" --lease-id "$(field "$T/l2" lease_id)" --token "$(field "$T/l2" token)"
like "$(cat "$T/.out")" not_owner "it says not_owner (the lease is gone)"

# A release naming a live lease under a stale token retires that worker.
kz-lease lease --socket "$S" --actor carol --conversation c3 >"$T/l3" 2>&1
L3=$(field "$T/l3" lease_id) K3=$(field "$T/l3" token) W3=$(field "$T/l3" worker)
rc_is 1 "release with a wrong token is refused" kz-lease release --socket "$S" --lease-id "$L3" --token "${K3%:*}:999999"
like "$(cat "$T/.out")" stale_token "refusal says stale_token"
t "and that lease's worker is retired and deleted" gone "$T/workers/$W3"
rc_is 1 "the owner's right token no longer renews it" kz-lease renew --socket "$S" --lease-id "$L3" --token "$K3"
t "the pool is warm again" wait_for warm 2

# The store dies: admission closes, nothing is granted.
disown "$STORE_PID"; kill -9 "$STORE_PID"; sleep 0.8
rc_is 3 "lease with the store gone exits 3" kz-lease lease --socket "$S" --actor alice --conversation c1
like "$(cat "$T/.out")" admission_closed "and says admission_closed"
EP1=$(redis-cli -s "$STORE_SOCK" GET 'kz:{default}:epoch' 2>/dev/null)
rm -f "$T"/appendonlydir/* "$T/store.sock"
# ... and comes back without its data.
bg "$(command -v valkey-server || command -v redis-server)" --port 0 --unixsocket "$STORE_SOCK" --unixsocketperm 600 \
	--dir "$T" --appendonly yes --save '' --daemonize no --loglevel warning
wait_sock "$STORE_SOCK"
t "admission reopens by itself" wait_for admission True
EP2=$(redis-cli -s "$STORE_SOCK" GET 'kz:{default}:epoch')
like "$EP2" '^[0-9a-f]{16}$' "store has a fresh epoch"
t "the pool is rebuilt to capacity" wait_for warm 2
OLD=$(ls "$T/workers" | grep -c -e "$W1" -e "$W2")
is "$OLD" 0 "workers from before the data loss were deleted, not reused"
rc_is 0 "leasing works again" kz-lease lease --socket "$S" --actor alice --conversation c1
grep -q '"event":"admission.close"' "$T/lease.log"; ok $? "admission.close was logged"
done_testing

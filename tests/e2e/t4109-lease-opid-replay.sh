#!/bin/bash
# kz-lease's op-id replay against a real redis-server: a stored result
# answers only the request that made it (the same op with the same
# arguments), a replayed lease or renew only while that lease still holds,
# and a lease id is a keyed hash that does not give its op id away.  A
# pool of one worker, so that the next owner gets the same worker.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
plan 28
standin_env
export LEASE_CAPACITY=1 LEASE_TTL_MS=60000 LEASE_STORE_TIMEOUT_MS=300
export LEASE_RECONCILE_MS=300 LEASE_CREATE_TIMEOUT_MS=3000
standin_serve
# call JSON: the daemon's reply, whether it granted or refused.
call() { kz-msg "$S" "$1" 2>/dev/null; }
# get FIELD: that field of the reply on stdin, empty when absent.
get() { python3 -c "import json,sys; v=json.load(sys.stdin).get('$1'); print('' if v is None else v)"; }
opid() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
lease() { printf '{"op":"lease","actor":"%s","conversation":"%s","op_id":"%s"%s}' "$1" "$2" "$3" "${4:-}"; }
renew() { printf '{"op":"renew","lease_id":"%s","token":"%s","op_id":"%s"}' "$1" "$2" "$3"; }
release() { printf '{"op":"release","lease_id":"%s","token":"%s","op_id":"%s"}' "$1" "$2" "$3"; }

t "the worker becomes warm" wait_for warm 1
OP=$(opid)
A=$(call "$(lease "alice" "c1" "$OP")")
LID=$(get lease_id <<<"$A") TOK=$(get token <<<"$A") W=$(get worker <<<"$A")
EP=$(get endpoint <<<"$A")
like "$TOK" '^[0-9a-f]{16}:[0-9]+$' "alice is granted a lease"

# The lease id (in audit records, on command lines) gives no op id away.
like "$LID" '^[0-9a-f]{32}$' "the lease id keeps its form (32 hex chars)"
tnot "it is not the op id with its halves swapped" test "$LID" = "${OP:16:16}${OP:0:16}"
tnot "nor the op id itself" test "$LID" = "$OP"

# A genuine retry (the reply was lost) is answered, and applied once.
A2=$(call "$(lease "alice" "c1" "$OP")")
is "$(get lease_id <<<"$A2") $(get token <<<"$A2") $(get worker <<<"$A2")" \
	"$LID $TOK $W" "the same request again names the same lease, token and worker"
is "$(st leased)" 1 "and leases nothing more"

# The op id with any other request is refused, not answered.
R=$(call "$(renew "x" "bogus" "$OP")")
is "$(get error <<<"$R")" bad_request "a renew carrying the lease's op id is refused"
unlike "$R" "$TOK|$W" "its refusal names neither the lease's token nor its worker"
R=$(call "$(renew "$LID" "bogus" "$OP")")
is "$(get error <<<"$R")" bad_request "so is one that also names the lease id"
M=$(call "$(lease "mallory" "m1" "$OP")")
is "$(get error <<<"$M")" bad_request "a lease by another actor with the same op id is refused"
unlike "$M" '"token"|"worker"|"endpoint"' "its refusal carries no token, worker or endpoint"
R=$(call "$(release "$LID" "$TOK" "$OP")")
is "$(get error <<<"$R")" bad_request "a release carrying the lease's op id is refused"
is "$(st leased)" 1 "alice still holds her lease"
like "$(call "$(renew "$LID" "$TOK" "$(opid)")")" '"ok": ?true' "and renews it with her token"

# A renew retried while the lease holds is answered.
RO=$(opid)
like "$(call "$(renew "$LID" "$TOK" "$RO")")" '"ok": ?true' "a renew succeeds"
like "$(call "$(renew "$LID" "$TOK" "$RO")")" '"ok": ?true' "and so does its retry"

# Once the lease has ended, a replay of it is refused: the worker is bob's.
like "$(call "$(release "$LID" "$TOK" "$(opid)")")" '"ok": ?true' "alice releases"
t "the worker comes back warm through its reset" wait_for warm 1
B=$(call '{"op":"lease","actor":"bob","conversation":"b1"}')
BT=$(get token <<<"$B")
is "$(get worker <<<"$B")" "$W" "bob is leased the same worker"
R=$(call "$(lease "alice" "c1" "$OP")")
is "$(get error <<<"$R")" stale_token "a replay of alice's lease after her release is refused: stale_token"
unlike "$R" "$TOK|$BT|$EP|\"worker\"" "it names no token, worker or endpoint"
R=$(call "$(renew "$LID" "$TOK" "$RO")")
is "$(get error <<<"$R")" stale_token "a replay of her renew after her release is refused: stale_token"
is "$(st leased)" 1 "bob's lease is untouched"
like "$(call "$(release "$(get lease_id <<<"$B")" "$BT" "$(opid)")")" '"ok": ?true' "bob releases"

# An expired lease is not answered again either.
t "the worker is warm again" wait_for warm 1
OP2=$(opid)
C=$(call "$(lease "carol" "c3" "$OP2" ',"ttl_ms":300')")
sleep 0.6
R=$(call "$(lease "carol" "c3" "$OP2" ',"ttl_ms":300')")
is "$(get error <<<"$R")" stale_token "a replay of a lease that expired is refused: stale_token"
unlike "$R" "$(get token <<<"$C")" "it does not carry the expired token"
done_testing

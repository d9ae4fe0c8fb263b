#!/bin/bash
# Who may call which op (the op table's flags): a peer that KZ_PEER_UIDS
# lets in but that is no operator may read status and lease, and gets
# operator_only (exit 1) for drain and reconcile, which root may call;
# naming it in KZ_OPERATOR_UIDS lets it drain.  A lease while draining is
# refused at the door with the closed reason (admission_closed, exit 3)
# and counted as refused.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (the client runs under another uid)"
command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
# A uid (and gid of the same number) no account on this host has.
P=47301
getent passwd $P >/dev/null && skip "uid $P is taken"
getent group $P >/dev/null && skip "gid $P is taken"
# The client as an install lays it out (0755, in a directory every uid
# may traverse): the peer cannot reach a checkout under /root, where CI's
# clone may be.
install -d -m 0755 "$T/bin" && install -m 0755 "$BIN/kz-lease" "$T/bin/"
PATH=$T/bin:$PATH
setpriv --reuid $P --regid $P --clear-groups test -x "$T/bin/kz-lease" ||
	{ echo "Bail out! $T/bin is not executable by other users"; exit 1; }
plan 19
standin_env
export LEASE_CAPACITY=1 LEASE_TTL_MS=60000 LEASE_RECONCILE_MS=300
export KZ_PEER_UIDS=$P
# The socket is 0660 root:root; its group is the peer's primary gid, so
# that the peer policy, not the file mode, is what is tested.
start() {
	bg kz-lease serve --socket "$S" 2>>"$T/lease.log"
	LPID=$LASTPID
	wait_sock "$S" && chgrp $P "$S"
}
as_peer() { setpriv --reuid $P --regid $P --clear-groups "$@"; }

start
t "the pool becomes warm" wait_for warm 1
rc_is 0 "the peer may read status" as_peer kz-lease status --socket "$S"
rc_is 0 "the peer may lease" as_peer kz-lease lease --socket "$S" --actor alice --conversation c1
rc_is 1 "the peer may not drain" as_peer kz-lease drain --socket "$S"
like "$(cat "$T/.out")" 'drain: operator_only' "it says operator_only"
rc_is 1 "the peer may not reconcile" as_peer kz-lease reconcile --socket "$S"
like "$(cat "$T/.out")" 'reconcile: operator_only' "it says operator_only"
is "$(st draining)" False "the refused drain changed nothing"
rc_is 0 "root may reconcile" kz-lease reconcile --socket "$S"
rc_is 0 "root may drain" kz-lease drain --socket "$S"
t "admission closes while draining" wait_for admission False
rc_is 3 "a lease while draining is refused" as_peer kz-lease lease --socket "$S" --actor bob --conversation c2
like "$(cat "$T/.out")" 'admission_closed: draining' "with the closed reason"
is "$(st leases_refused)" 1 "and counted as refused"
rc_is 0 "root lifts the drain" kz-lease drain --off --socket "$S"

# Named an operator, the same peer may drain (and lift it).
kill "$LPID"; wait "$LPID" 2>/dev/null
rm -f "$S"
KZ_OPERATOR_UIDS=$P start
rc_is 0 "an operator peer may drain" as_peer kz-lease drain --socket "$S"
is "$(st draining)" True "the pool is draining"
rc_is 0 "and may lift it" as_peer kz-lease drain --off --socket "$S"
rc_is 0 "and may reconcile" as_peer kz-lease reconcile --socket "$S"
done_testing

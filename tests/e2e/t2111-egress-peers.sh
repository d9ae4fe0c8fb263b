#!/usr/bin/env bash
# Who may use the proxy's Unix socket, and the two pools of connections
# not yet granted.  The socket file is made world-connectable here, so
# that what refuses is the credential check (SO_PEERCRED against
# KZ_PEER_UIDS / KZ_PEER_GIDS) and not the mode: a uid that is not
# allowed is closed unanswered, even with a valid grant, its flood holds
# no connection, each refusal is counted by the status op as peer_refused
# and they are logged once; an allowed uid, and a uid in an allowed group,
# are served.  Then five TCP peers (distinct source addresses in a network
# namespace the test makes) flood a non-loopback TCP listener with half
# heads: they are held to the TCP pool (a quarter of the bound), and an
# allowed peer's granted request on the Unix socket, whose pool is its
# own, is still admitted, as are an allowed uid's own ungranted
# connections up to its share.  The peers are those of the start: a
# reload that names others changes nothing until a restart, and says so;
# peer lists that cannot be parsed keep a Unix socket from being opened.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=111
plan 19

command -v setpriv >/dev/null || { echo "1..0 # SKIP no setpriv"; exit 0; }
eg_site $N
eg_keys

# The TCP clients' namespace: 10.213.N.16/28, the host side .17 (where
# the proxy listens), five client addresses .18 to .22.
CNS=kzegc-$N-$$ CVH=kzegch$N-$$ CVN=kzegcn$N-$$
CVH=${CVH:0:15} CVN=${CVN:0:15}
ip netns add "$CNS" || { echo "Bail out! cannot create the clients' namespace"; exit 1; }
on_exit "ip netns del $CNS 2>/dev/null; ip link del $CVH 2>/dev/null"
ip link add "$CVH" type veth peer name "$CVN" netns "$CNS" &&
	ip addr add "10.213.$N.17/28" dev "$CVH" && ip link set "$CVH" up &&
	ip netns exec "$CNS" ip link set "$CVN" up &&
	ip netns exec "$CNS" ip link set lo up ||
	{ echo "Bail out! cannot set up the clients' link"; exit 1; }
for i in 18 19 20 21 22; do
	ip netns exec "$CNS" ip addr add "10.213.$N.$i/28" dev "$CVN" nodad
done

NOBODY=$(id -u nobody)
GOOD=$((NOBODY - 10)) BAD=$((NOBODY - 11)) INGRP=$((NOBODY - 12))
GRP=$((NOBODY - 13))
EG_PORT=$(eg_free_port)
TPORT=$(eg_free_port)
S=$T/eg.sock ST=$T/eg-status.sock
cat >"$T/eg.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = unix:$S,127.0.0.1:$EG_PORT,10.213.$N.17:$TPORT
SANDBOX_EGRESS_STATUS_SOCKET = $ST
SANDBOX_EGRESS_MAX_CONNECTIONS = 128
SANDBOX_EGRESS_THREADS = 2
SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = 30
KZ_PEER_UIDS = $GOOD
KZ_PEER_GIDS = $GRP
EOF
eg_serve "$T/eg.conf" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
wait_sock "$ST" 10 || { echo "Bail out! no status socket"; exit 1; }
chmod 0666 "$S"
G=$(kz-egress grant --field-key "$EG_KEY" --run run-111)

eg_flood_tools
# reason NAME: the status op's count of refusals for NAME (0 if none).
reason() {
	kz-msg "$ST" '{"op":"status"}' | "$EG_PY" -c '
import json, sys
print(json.load(sys.stdin).get("refused_by_reason", {}).get(sys.argv[1], 0))' "$1"
}
status_field() {
	kz-msg "$ST" '{"op":"status"}' | "$EG_PY" -c '
import json, sys
print(json.load(sys.stdin).get(sys.argv[1]))' "$1"
}

# ---- (a) the Unix socket serves allowed peers only ----
is "$(stat -c %a "$S")" 666 "the proxy socket is connectable by every uid (mode 0666)"
is "$(eg_as "$BAD" "$EG_PY" "$EG_REQ" "$S" "$G")" closed \
	"a uid that is not an allowed peer gets no answer, though its grant is valid"
is "$(reason peer_refused)" 1 "the status op counts the refusal as peer_refused"
eg_flood bad setpriv --reuid="$BAD" --regid="$NOBODY" --clear-groups "$EG_PY" "$EG_FLOOD" unix "$S" 40 ||
	{ echo "Bail out! the refused uid's flood did not start"; exit 1; }
is "$(eg_collect bad)" "0 0 0" \
	"a refused uid's 40 half heads hold no connection and get no answer"
is "$(reason peer_refused)" 41 "every refused connection is counted"
is "$(status_field open_conns)" 0 "no connection of a refused peer is open"
is "$(grep -c '"event":"egress.peer_refused"' "$T/egress.log")" 1 \
	"41 refusals in one window are logged once"
like "$(grep '"event":"egress.peer_refused"' "$T/egress.log")" "\"uid\":\"$BAD\"" \
	"the line names the refused uid"
is "$(eg_as "$GOOD" "$EG_PY" "$EG_REQ" "$S" "$G")" 200 "an allowed uid (KZ_PEER_UIDS) is served"
is "$(setpriv --reuid="$INGRP" --regid="$NOBODY" --groups="$GRP" \
	"$EG_PY" "$EG_REQ" "$S" "$G")" 200 \
	"a uid with an allowed group (KZ_PEER_GIDS) as a supplementary group is served"

# ---- (b) TCP peers cannot take the Unix socket's pool ----
for a in 18 19 20 21 22; do
	eg_flood tcp$a ip netns exec "$CNS" "$EG_PY" "$EG_FLOOD" tcp "10.213.$N.$a" \
		"10.213.$N.17" "$TPORT" 20 ||
		{ echo "Bail out! the TCP flood from .$a did not start"; exit 1; }
done
eg_flood unix setpriv --reuid="$GOOD" --regid="$NOBODY" --clear-groups "$EG_PY" "$EG_FLOOD" unix "$S" 20 ||
	{ echo "Bail out! the allowed uid's flood did not start"; exit 1; }
# Root, as the workers' relays connect (the flooding uid holds its own
# share).
is "$("$EG_PY" "$EG_REQ" "$S" "$G")" 200 \
	"under five TCP peers' floods, an allowed peer's granted request on the Unix socket is admitted"
UR=$(eg_collect unix)
eg_held tcp{18..22}
is "$EG_HELD" 32 "the five TCP peers together hold 32 ungranted connections, a quarter of 128"
is "${UR%% *}" 16 "the allowed uid still holds its 16 ungranted connections on the Unix socket ($UR)"
like "$(grep '"event":"egress.ungranted"' "$T/egress.log" | head -1)" '"pool":"tcp"' \
	"the refusals at the TCP pool are logged as the TCP pool's"
sleep 0.5	# the flooders' sockets closed
is "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:$EG_PORT" \
	-U "run:$G" http://origin.kz.test/)" 200 "TCP clients are served again once the floods are gone"

# ---- a reload does not change who is admitted ----
sed -i "s/^KZ_PEER_UIDS = .*/KZ_PEER_UIDS = $BAD/" "$T/eg.conf"
kill -HUP "$EG_PID"
i=0; while ! grep -q '"event":"egress.reload"' "$T/egress.log"; do
	i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.05; done
like "$(grep '"event":"egress.reload"' "$T/egress.log")" '"restart_needed":"yes"' \
	"a reload naming other peers says they change only at restart"
is "$(eg_as "$BAD" "$EG_PY" "$EG_REQ" "$S" "$G"):$(eg_as "$GOOD" "$EG_PY" "$EG_REQ" "$S" "$G")" closed:200 \
	"after it the peers of the start are still the ones admitted"
unlike "$(cat "$T/egress.log")" '"level":"(error|fatal)"' "no errors logged"

printf 'SANDBOX_EGRESS_LISTEN = unix:%s\nKZ_PEER_UIDS = no-such-user-%s\n' \
	"$T/bad.sock" "$$" >"$T/bad.conf"
rc=0; timeout 10 kz-egress serve --config "$T/bad.conf" 2>"$T/bad.log" || rc=$?
is "$rc:$(test -e "$T/bad.sock" && echo socket)" 2: \
	"peers that cannot be parsed: serve exits 2 and opens no Unix socket"
done_testing

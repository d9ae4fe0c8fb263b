#!/usr/bin/env bash
# Connections that have not shown a grant (slowloris): a client that opens
# connection after connection and sends half a request head each time
# could fill SANDBOX_EGRESS_MAX_CONNECTIONS before showing any grant, and
# no run got through.  A peer (a uid on the Unix socket, by SO_PEERCRED;
# a source address on TCP, all of 127.0.0.0/8 one peer) holds at most an
# eighth of the bound (at least 16) without a grant, and all ungranted
# connections together at most half of it: past either a connection gets
# a 503 and is closed, logged at most once in 10 s.  Under two floods, one
# over TCP and one from another uid on the Unix socket, a run's granted
# request still succeeds; each flooder is held to its 16; five uids
# flooding together are held to 64 (half of 128).  The flooding uids are
# allowed peers (KZ_PEER_UIDS): one that is not is closed unanswered,
# whatever the socket's mode.  The head deadline is total: a client
# trickling a byte at a time is cut off at it.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=110
plan 12

eg_site $N
eg_keys
EG_PORT=$(eg_free_port)
S=$T/eg.sock
NOBODY=$(id -u nobody)
cat >"$T/eg.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = unix:$S,127.0.0.1:$EG_PORT
SANDBOX_EGRESS_MAX_CONNECTIONS = 128
SANDBOX_EGRESS_THREADS = 2
SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = 30
KZ_PEER_UIDS = $NOBODY,$((NOBODY - 1)),$((NOBODY - 2)),$((NOBODY - 3)),$((NOBODY - 4)),$((NOBODY - 5))
EOF
eg_serve "$T/eg.conf" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
# Other uids may reach the proxy's Unix socket file (as an operator's
# would): the peer check, not the mode, says which are served.
chmod 0666 "$S"
G=$(kz-egress grant --field-key "$EG_KEY" --run run-110)

eg_flood_tools

eg_flood tcp "$EG_PY" "$EG_FLOOD" tcp 127.0.0.1 "$EG_PORT" 70 || { echo "Bail out! the TCP flood did not start"; exit 1; }
eg_flood unix setpriv --reuid="$NOBODY" --regid="$NOBODY" --clear-groups "$EG_PY" "$EG_FLOOD" unix "$S" 70 || { echo "Bail out! the Unix flood did not start"; exit 1; }
is "$("$EG_PY" "$EG_REQ" "$S" "$G")" 200 \
	"under two slowloris floods (140 half heads, bound 128) a run's granted request succeeds"
TR=$(eg_collect tcp)
UR=$(eg_collect unix)
is "${TR%% *}" 16 "the TCP flooder (127.0.0.1) holds 16 connections, an eighth of 128 ($TR)"
is "${UR%% *}" 16 "the flooding uid on the Unix socket holds 16 ($UR)"
# (Over TCP a 503 written as the client's half head arrives may be lost
# to the reset the close sends; a Unix socket keeps it.)
t "the Unix connections past the cap got a 503 ($UR)" test "${UR##* }" -ge 50
is "$(grep -c '"event":"egress.ungranted"' "$T/egress.log")" 1 \
	"the refusals are logged once, not once each"
like "$(grep '"event":"egress.ungranted"' "$T/egress.log")" '"bound":"peer"' \
	"the log line names the per-peer bound"
sleep 0.5

# Five uids flooding together: all ungranted connections are held to 64.
for i in 1 2 3 4 5; do
	eg_flood u$i setpriv --reuid=$((NOBODY - i)) --regid="$NOBODY" --clear-groups "$EG_PY" "$EG_FLOOD" unix "$S" 20 || { echo "Bail out! flood $i did not start"; exit 1; }
done
eg_held u{1..5}
is "$EG_HELD" 64 "five flooding uids together hold 64 ungranted connections, half of 128"
sleep 0.5	# the flooders' sockets closed
# A uid not in KZ_PEER_UIDS, with a valid grant: closed unanswered.
is "$(setpriv --reuid=$((NOBODY - 6)) --regid="$NOBODY" --clear-groups \
	"$EG_PY" "$EG_REQ" "$S" "$G")" closed \
	"a uid that is not an allowed peer is closed unanswered, grant or not"
like "$(grep '"event":"egress.peer_refused"' "$T/egress.log")" "\"uid\":\"$((NOBODY - 6))\"" \
	"the refused peer is logged with its uid"
is "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "http://127.0.0.1:$EG_PORT" \
	-U "run:$G" http://origin.kz.test/)" 200 "the floods gone, TCP clients are served again"

# ---- the head deadline is total, not per byte ----
TPORT=$(eg_free_port)
sed -e "s|^SANDBOX_EGRESS_LISTEN = .*|SANDBOX_EGRESS_LISTEN = 127.0.0.1:$TPORT|" \
	-e 's/^SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = .*/SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = 2/' \
	"$T/eg.conf" >"$T/trickle.conf"
bg kz-egress serve --config "$T/trickle.conf" 2>"$T/trickle.log"
i=0; while ! bash -c "echo >/dev/tcp/127.0.0.1/$TPORT" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 100 ] && break; sleep 0.05; done
R=$("$EG_PY" - "$TPORT" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t = time.time()
head = b"GET http://origin.kz.test/ HTTP/1.1\r\nHost: origin.kz.test\r\nX-Pad: " + b"a" * 200
try:
    for ch in head:
        s.sendall(bytes([ch]))
        time.sleep(0.2)
except OSError:
    pass
print("%.1f" % (time.time() - t))
EOF
)
t "a client trickling a byte every 0.2 s is cut off at the 2 s head deadline (took $R s)" \
	awk -v v="$R" 'BEGIN { exit !(v >= 1.8 && v <= 5) }'
unlike "$(cat "$T/egress.log")" '"level":"(error|fatal)"' "no errors logged"
done_testing

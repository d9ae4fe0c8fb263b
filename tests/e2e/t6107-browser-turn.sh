#!/usr/bin/env bash
# WebRTC in a kz-browser session goes only through the operator's TURN
# server: real Chromium, real coturn (TCP listener only) in the test's
# network namespace.  A page that names its own STUN and TURN server gets a
# relay candidate from the operator's coturn, allocated for the session's
# keyed hash (the run of its grant), reached by TURN/TCP through the
# worker's relay and kz-egress; no host or srflx candidate, and the page's
# own server sees nothing.  Only that session's Chromium runs under the
# worker's browser filter variant (NETLINK_ROUTE allowed) in a namespace
# with an interface that routes nowhere; the run's code on the same worker
# still cannot open a netlink socket.  A half-made TURN configuration is
# refused; without TURN the same page gets no candidate at all, and its
# Chromium has the code's filter and loopback only.
# e2e: alone (Chromium takes what CPU there is, and a session's operations wait at most 20 s)
. "$(dirname "$0")/lib.sh"
if [ ! -x /usr/lib/chromium/chromium ]; then
	echo "1..0 # SKIP Debian's chromium is not installed"; exit 0
fi
if ! command -v turnserver >/dev/null; then
	echo "1..0 # SKIP coturn's turnserver is not installed"; exit 0
fi
. "$TOP/tests/e2e/browser-lib.sh"
# The instruction counts of the worker's filter and of its browser variant.
read -r BASE RTC < <("$BIN/kz-sandbox" seccomp |
	sed -n '1s/^# \([0-9]*\) BPF instructions (\([0-9]*\) .*/\1 \2/p')
# br_net PID: the interfaces and the main table's IPv4 routes of PID's
# network namespace, one line.
br_net() {
	echo "$(nsenter -t "$1" -n ip -o link | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort | tr '\n' ' ')|" \
		"$(nsenter -t "$1" -n ip -4 route show table main)"
}
plan 21

N=167
head -c 24 /dev/urandom | base64 >"$T/turn.secret"
chmod 600 "$T/turn.secret"
TURN=10.213.$N.2:3478
# kz-egress admits CONNECT to exactly this authority for a turn grant.
export SANDBOX_EGRESS_TURN=$TURN
br_start $N SANDBOX_EGRESS_TURN=$TURN BROWSER_TURN_SECRET_FILE="$T/turn.secret" ||
	{ echo "Bail out! the stack did not start"; exit 1; }
unset SANDBOX_EGRESS_TURN
ok 0 "kz-egress with SANDBOX_EGRESS_TURN, the lease stack and kz-browser with TURN"

cat >"$T/turn.conf" <<EOC
listening-ip=$EG_ORIGIN
listening-port=3478
relay-ip=$EG_ORIGIN
min-port=49152
max-port=49200
no-udp
no-tls
no-dtls
use-auth-secret
static-auth-secret=$(cat "$T/turn.secret")
realm=kz.test
no-cli
simple-log
verbose
log-file=stdout
pidfile=$T/turn.pid
EOC
ip netns exec "$EG_NS" turnserver -c "$T/turn.conf" >"$T/turn.log" 2>&1 &
_pids="$_pids $!"; TPID=$!
on_exit "kill $TPID 2>/dev/null"
for _ in $(seq 1 100); do
	ip netns exec "$EG_NS" bash -c "echo >/dev/tcp/$EG_ORIGIN/3478" 2>/dev/null && break; sleep 0.05
done
# The page's own server, TCP and UDP on the next port: it logs anything.
bg ip netns exec "$EG_NS" "$BPY" -c '
import socket, sys, threading
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind((sys.argv[1], 3479))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((sys.argv[1], 3479)); t.listen(8)
def log(w):
    with open(sys.argv[2], "a") as f: f.write(w + "\n")
threading.Thread(target=lambda: [log("udp") for _ in iter(lambda: u.recv(2048), None)], daemon=True).start()
while True:
    t.accept(); log("tcp")' "$EG_ORIGIN" "$T/own.log"
: >"$T/own.log"
O='http://origin.kz.test'

# Half a configuration is refused at start.
env BROWSER_EGRESS_CONFIG="$T/eg.conf" SANDBOX_EGRESS_TURN=$TURN \
	"$BIN/kz-browser" serve --socket "$T/half.sock" --check >"$T/half.out" 2>&1
is "$?" "2" "SANDBOX_EGRESS_TURN without BROWSER_TURN_SECRET_FILE is a bad configuration"
like "$(cat "$T/half.out")" "set together or not at all" "and says so in one line"

R=$(bcall open '{"actor":"alice","conversation":"c1","url":"'$O'/rtc?h='$EG_ORIGIN'&p=3479"}')
SID=$(jf "$R" session)
is "$(jf "$R" page title)" "rtc" "open: the WebRTC page is loaded"
for _ in $(seq 1 300); do grep -q '^/rtc-report' "$T/origin.log" && break; sleep 0.1; done
REP=$(grep '^/rtc-report' "$T/origin.log" | tail -1)
diag "candidates: $REP"
unlike "$REP" 'typ|/host|host/|srflx|prflx' "no host, srflx or prflx candidate"
is "$(sed 's/.*&cfg=//' <<<"$REP")" "relay|turn:$TURN?transport=tcp" \
	"the page's RTCPeerConnection uses only the operator's TURN/TCP server, relay only"
like "$REP" "relay/udp/$EG_ORIGIN" "the page got a relay candidate on the operator's TURN server"
is "$(tr ',' '\n' <<<"${REP#*\?}" | grep -vc '^relay/')" "0" "every candidate is a relay candidate"
U=$(grep -o 'user <[0-9]*:[0-9a-f]*>' "$T/turn.log" | grep -i -m1 -o '[0-9]*:[0-9a-f]*')
grep -q "ALLOCATE processed, success" "$T/turn.log" && [ -n "$U" ]
ok $? "coturn allocated a relay for the session's TURN username ($U)"
# The session's grant, minted again: its body names the run's keyed hash.
G=$(kz-egress grant --field-key "$T/field.key" --run "$SID")
RUNH=$("$BPY" -c 'import base64,json,sys; b=sys.argv[1].split(".")[0]; print(json.loads(base64.urlsafe_b64decode(b + "=" * (-len(b) % 4)))["run"])' "$G")
is "${U#*:}" "$RUNH" "the username is the session's keyed hash, the run of its grant"
is "$(sort -u "$T/own.log")" "" "the page's own STUN and TURN server saw no packet and no connection"
unlike "$(kz-audit query --kind egress_refusal --dir "$T/audit" 2>/dev/null)" '"port":3479' \
	"and kz-egress was never asked for it"
CP=$(br_chromium)
is "$("$BPY" "$TOP/tests/browser/filter.py" "$CP" | cut -d' ' -f1)" "$RTC" \
	"Chromium runs under the worker's WebRTC variant of the filter ($RTC instructions)"
VHASH=$("$BPY" "$TOP/tests/browser/filter.py" "$CP" | cut -d' ' -f2)
is "$(br_net "$CP")" "kzrtc0 kzrtc1 lo | " \
	"its namespace: loopback and the veth pair, no route anywhere"
NL=$(wrun 'python3 -c "
import socket
try: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE); print(\"opened\")
except OSError as e: print(e.errno)"')
is "$NL" "97" "the run's code on the same worker still cannot open a NETLINK_ROUTE socket (EAFNOSUPPORT)"
R=$(bcall close '{"session":"'$SID'"}')
# The worker's reset runs before it is warm again: a loaded machine may
# take a while (60 s at most).
wait_for warm 1 600 || diag "no warm worker again"

# Without TURN: the same page, no candidate leaves the proxy.
br_daemon "$T/plain.sock"
: >"$T/origin.log"
R=$(bcall --sock "$T/plain.sock" open '{"actor":"alice","conversation":"c2","url":"'$O'/rtc?h='$EG_ORIGIN'&p=3479"}')
SID=$(jf "$R" session)
is "$(jf "$R" page title)" "rtc" "open without TURN: the WebRTC page is loaded"
for _ in $(seq 1 300); do grep -q '^/rtc-report' "$T/origin.log" && break; sleep 0.1; done
REP=$(grep '^/rtc-report' "$T/origin.log" | tail -1)
diag "candidates without TURN: $REP"
unlike "$REP" 'relay' "without TURN configured no relay candidate appears"
is "$(sort -u "$T/own.log")" "" "and the page's own server still sees nothing"
is "${REP%%&cfg=*}" "/rtc-report?none" "the page gathered no candidate at all"
CP=$(br_chromium)
F=$("$BPY" "$TOP/tests/browser/filter.py" "$CP")
[ "${F% *}" = "$BASE" ] && [ "${F#* }" != "$VHASH" ]
ok $? "its Chromium runs under the worker's own filter ($F), not the variant"
is "$(br_net "$CP")" "lo | " "and its namespace has loopback only"
bcall --sock "$T/plain.sock" close '{"session":"'$SID'"}' >/dev/null
done_testing

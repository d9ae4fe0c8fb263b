#!/usr/bin/env bash
# DNS answers the real Internet gives: an answer too big for UDP (a long
# CNAME chain, over 1500 bytes) is truncated by the test server, asked
# again over TCP, resolves and is pinned; a truncated answer whose TCP
# retry never comes back, or a resolver that never answers, is refused
# within the bound; a CDN's 32 public answers are allowed, 64 too, 65 and
# an oversized answer are refused; 32 with one private among them are
# refused whole.  Public verdicts come from `kz-egress check`, which never
# connects; the only connections go to the origin in this test's netns.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=107

eg_netns $N || { echo "1..0 # SKIP cannot create a network namespace"; exit 0; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
O=$EG_ORIGIN
plan 25

# The zone, with the sizes it promises measured rather than assumed.
"$EG_PY" - "$O" >"$T/zone.json" <<'EOF'
import json, sys
o = sys.argv[1]
def chain(tag, n):
    return ["%s%d-%s.%s.kz.test" % (tag, i, "a" * 60, "b" * 60)
            for i in range(n)]
pub4 = ["93.184.216.%d" % i for i in range(1, 200)]
pub6 = ["2606:2800:220:1::%x" % i for i in range(1, 200)]
z = {
    "long.kz.test": {"CNAME": chain("e", 8), "A_seq": [[o], ["127.0.0.1"]]},
    "longc.kz.test": {"CNAME": chain("f", 8), "A": [o]},
    "slow.kz.test": {"CNAME": chain("s", 8), "A": [o], "tcp": "hang"},
    "huge.kz.test": {"CNAME": chain("h", 80), "A": [o]},
    "cdn24.kz.test": {"A": pub4[:12], "AAAA": pub6[:12]},
    "cdn32.kz.test": {"A": pub4[:16], "AAAA": pub6[:16]},
    "cdn64.kz.test": {"A": pub4[:32], "AAAA": pub6[:32]},
    "cdn65.kz.test": {"A": pub4[:33], "AAAA": pub6[:32]},
    "cdn32p.kz.test": {"A": pub4[:15] + ["10.1.2.3"], "AAAA": pub6[:16]},
    "cdn32l.kz.test": {"A": pub4[:16], "AAAA": pub6[:15] + ["::1"]},
}
json.dump(z, sys.stdout)
EOF
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
eg_keys

EG_PORT=$(eg_free_port)
for m in public_internet private_networks; do
	cat >"$T/$m.conf" <<EOF
SANDBOX_EGRESS_MODE = $m
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:$EG_PORT
EOF
done

# The size of the answer dnsd gives over TCP, from a plain client.
tcp_size() { # tcp_size NAME QTYPE
	"$EG_PY" - "${EG_DNS##*:}" "$1" "$2" <<'EOF'
import socket, struct, sys
port, name, qtype = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
q += struct.pack("!HH", qtype, 1)
s = socket.create_connection(("127.0.0.1", port), 5)
s.sendall(struct.pack("!H", len(q)) + q)
n = struct.unpack("!H", s.recv(2, socket.MSG_WAITALL))[0]
print(len(s.recv(n, socket.MSG_WAITALL)))
EOF
}
verdict() { # verdict MODE HOST: "allow" or the refusal reason
	local out
	out=$(kz-egress check --config "$T/$1.conf" "$2" 80 2>/dev/null)
	case $out in
	*'"verdict":"allow"'*) echo allow ;;
	*'"reason":"'*) out=${out#*\"reason\":\"}; echo "${out%%\"*}" ;;
	*) echo "error:$out" ;;
	esac
}
count_answers() { # the number of answers check printed
	kz-egress check --config "$T/$1.conf" "$2" 80 2>/dev/null |
		grep -o '"answers":\[[^]]*\]' | tr ',' '\n' | grep -c '[0-9]'
}

SZ=$(tcp_size longc.kz.test 1)
[ "$SZ" -ge 1500 ] && [ "$SZ" -le 16384 ]; ok $? "the long answer is $SZ bytes: over 1500, under the bound"

# Truncated over UDP, complete over TCP.
: >"$T/dns.queries"
OUT=$(kz-egress check --config "$T/private_networks.conf" longc.kz.test 80 2>&1)
like "$OUT" "\"verdict\":\"allow\".*\"pinned\":\"$O\"" "a truncated answer is asked again over TCP and allowed, pinned to the origin"
Q=$(cat "$T/dns.queries")
like "$Q" '^longc\.kz\.test 1 tc$' "dnsd sent it truncated over UDP"
like "$Q" 'longc\.kz\.test 1 tcp' "and kz-egress asked again over TCP"
is "$(verdict public_internet longc.kz.test)" private_use \
	"the answer over TCP is judged like any other (10.213.$N.2 is private where not listed)"

# Live: the proxy resolves over TCP, connects to the address it checked,
# and never asks again for that connection; the next connection asks again
# and its answer (127.0.0.1 now) is refused.
eg_serve "$T/private_networks.conf" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
G=$(kz-egress grant --field-key "$EG_KEY" --run run-107)
: >"$T/dns.queries"
code() { curl -s -o "$T/body" -w '%{http_code}' -x "http://run:$G@127.0.0.1:$EG_PORT" "$@"; }
is "$(code http://long.kz.test/first)" 200 "a name whose answer needs TCP reaches the origin through the proxy"
like "$(cat "$T/body")" '^origin long.kz.test /first' "the origin in the netns (the checked address) served it"
is "$(grep -c '^long\.kz\.test 1 tcp$' "$T/dns.queries")" 1 "one question over TCP for that connection, none after the check"
is "$(code http://long.kz.test/second)" 403 "the next connection asks again: its answer (loopback) is refused"
like "$(grep egress.refuse "$T/egress.log" | tail -1)" '"reason":"loopback","host":"long.kz.test"' \
	"recorded as loopback for long.kz.test"

# A truncated answer whose TCP retry hangs: refused, within the bound.
s=$(date +%s%N)
is "$(verdict private_networks slow.kz.test)" resolve_failed "a truncated answer whose TCP retry never answers is refused"
el=$(( ($(date +%s%N) - s) / 1000000 ))
[ $el -lt 7000 ]; ok $? "and refused within the resolution bound (4 s; took ${el} ms)"
like "$(cat "$T/dns.queries")" 'slow\.kz\.test 1 tcp' "the TCP retry was asked (and hung)"
s=$(date +%s%N)
is "$(code http://slow.kz.test/)" 403 "live: the hung retry refuses the request"
el=$(( ($(date +%s%N) - s) / 1000000 ))
[ $el -lt 7000 ]; ok $? "live: within the bound (took ${el} ms)"

# A resolver that takes the question and never answers: c-ares would
# wait 2 s and then 4 s; the lookup's deadline ends it at 4 s.
bg "$EG_PY" -c 'import os, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1]); time.sleep(120)' "$T/mute.port"
i=0
while [ ! -s "$T/mute.port" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
sed "s/^SANDBOX_EGRESS_RESOLVER = .*/SANDBOX_EGRESS_RESOLVER = 127.0.0.1:$(cat "$T/mute.port")/" \
	"$T/private_networks.conf" >"$T/mute.conf"
s=$(date +%s%N)
is "$(verdict mute longc.kz.test)" resolve_failed "a resolver that never answers: refused"
el=$(( ($(date +%s%N) - s) / 1000000 ))
[ $el -ge 3500 ] && [ $el -lt 5500 ]; ok $? "at the 4 s deadline (took ${el} ms)"

# Many answers: every one judged, the bound a bound.
is "$(verdict public_internet cdn24.kz.test)" allow "12 A and 12 AAAA, all public: allowed"
is "$(verdict public_internet cdn32.kz.test)" allow "32 public answers: allowed"
is "$(count_answers public_internet cdn32.kz.test)" 32 "all 32 answers were judged and listed"
is "$(verdict public_internet cdn64.kz.test)" allow "64 public answers: allowed"
is "$(verdict public_internet cdn65.kz.test)" too_many_answers "65 answers: refused, never cut to 64"
is "$(verdict public_internet cdn32p.kz.test)" private_use "32 answers with one private: refused whole"
is "$(verdict public_internet cdn32l.kz.test)" loopback "32 answers with one loopback AAAA: refused whole"

SZ=$(tcp_size huge.kz.test 1)
is "$(verdict private_networks huge.kz.test)" resolve_failed "an answer of $SZ bytes (over 16384) is refused"
done_testing

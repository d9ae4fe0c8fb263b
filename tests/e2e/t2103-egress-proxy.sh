#!/usr/bin/env bash
# The live proxy with standard clients: curl through HTTP_PROXY with the
# grant as the Basic password, the 407 challenge, Bearer, the Unix socket,
# CONNECT, bodies (Content-Length and chunked); every grant failure refused;
# a kept-alive connection never carries a request for another destination
# on the first one's upstream; smuggling ambiguities, oversized heads and
# slow heads refused; the host's own addresses refused, one it gains after
# the start included; a client that shuts its writing side after its
# request still gets the answer; the refusal record (log and audit event) without
# path, query, userinfo or grant.  The only origin is in this test's netns.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=103
plan 53

eg_netns $N || { echo "Bail out! cannot create a network namespace"; exit 1; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
O=$EG_ORIGIN
cat >"$T/zone.json" <<EOF
{"origin.kz.test": {"A": ["$O"]}, "alias.kz.test": {"A": ["$O"]},
 "loop.kz.test": {"A": ["127.0.0.1"]}}
EOF
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
eg_keys

# A stand-in audit sink: acknowledges every append and keeps the events.
bg "$EG_PY" "$EGDIR/sink.py" "$T/audit.sock" "$T/audit.jsonl"
wait_sock "$T/audit.sock" 10

EG_PORT=$(eg_free_port)
cat >"$T/eg.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30, 10.213.$N.5/32
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:$EG_PORT, unix:$T/eg.sock
SANDBOX_EGRESS_AUDIT_SOCKET = $T/audit.sock
SANDBOX_EGRESS_HEADER_TIMEOUT_SECONDS = 2
EOF
eg_serve "$T/eg.conf" 2>"$T/egress.log" || { echo "Bail out! kz-egress did not start"; exit 1; }
P=http://127.0.0.1:$EG_PORT
G=$(kz-egress grant --field-key "$EG_KEY" --run run-103)

code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
is "$(HTTP_PROXY="http://run:$G@127.0.0.1:$EG_PORT" http_proxy="http://run:$G@127.0.0.1:$EG_PORT" \
	code http://origin.kz.test/hello)" 200 "HTTP_PROXY with the grant as password reaches the origin"
like "$(cat "$T/body")" '^origin origin.kz.test /hello' "the origin got the request in origin-form"
is "$(code -x "$P" http://origin.kz.test/)" 407 "no credentials: 407"
like "$(curl -s -i -x "$P" http://origin.kz.test/ | tr -d '\r')" 'Proxy-Authenticate: Basic realm="kz-egress"' \
	"the 407 carries a Basic challenge"
is "$(code -x "$P" --proxy-anyauth -U "run:$G" http://origin.kz.test/)" 200 \
	"a client that waits for the challenge then authenticates"
is "$(code -x "$P" -H "Proxy-Authorization: Bearer $G" http://origin.kz.test/)" 200 "Bearer grant"
is "$(code --unix-socket "$T/eg.sock" --request-target http://origin.kz.test/u \
	-H "Proxy-Authorization: Bearer $G" http://origin.kz.test/u)" 200 "through the Unix socket"
is "$(code -p -x "http://run:$G@127.0.0.1:$EG_PORT" http://origin.kz.test/tunnel)" 200 "through a CONNECT tunnel"
code -x "http://run:$G@127.0.0.1:$EG_PORT" -H 'X-Hop: 1' -H 'Connection: X-Hop' \
	http://origin.kz.test/headers >/dev/null
H=$(cat "$T/body")
unlike "$H" '[Pp]roxy-[Aa]uthorization|[Xx]-[Hh]op' "neither the grant nor hop-by-hop headers reach the origin"
like "$H" 'Host: origin.kz.test' "the origin sees the requested Host"

# A malformed response head: 502 as soon as it cannot be a head, not
# after a timeout (the origin holds the connection open for 20 s).
for raw in barelf ssh nul; do
	t0=$(date +%s%N)
	c=$(code -m 15 -x "http://run:$G@127.0.0.1:$EG_PORT" "http://origin.kz.test/raw/$raw")
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$c" = 502 ] && [ "$ms" -lt 2000 ]
	ok $? "an origin's $raw response head: a prompt 502 (got $c in $ms ms)"
done

head -c 2500000 /dev/urandom >"$T/up"
SUM=$(sha256sum <"$T/up" | cut -d' ' -f1)
curl -s -x "http://run:$G@127.0.0.1:$EG_PORT" --data-binary @"$T/up" http://origin.kz.test/p >"$T/body"
is "$(cat "$T/body")" "got 2500000 $SUM" "a 2.5 MB Content-Length body arrives whole"
curl -s -x "http://run:$G@127.0.0.1:$EG_PORT" -H 'Transfer-Encoding: chunked' --data-binary @"$T/up" \
	http://origin.kz.test/p >"$T/body"
is "$(cat "$T/body")" "got 2500000 $SUM" "a chunked body arrives whole"

# Every grant failure is the same 403.
# One character in the middle of the signature changed.
i=$(( ${#G} - 20 )); c=${G:$i:1}; [ "$c" = A ] && c=B || c=A
TAMPERED="${G:0:$i}$c${G:$((i + 1))}"
head -c 32 /dev/urandom >"$T/other.key"; chmod 600 "$T/other.key"
OTHER=$(kz-egress grant --field-key "$T/other.key" --run run-103)
SHORT=$(kz-egress grant --field-key "$EG_KEY" --run run-103 --ttl 1)
printf 'SANDBOX_EGRESS_TOKEN_TTL_SECONDS = 3600\n' >"$T/long.conf"
LONG=$(kz-egress grant --config "$T/long.conf" --field-key "$EG_KEY" --run run-103 --ttl 3600 2>/dev/null)
CLAIMS=$(printf '{"v":1,"run":"00","iat":1,"exp":99999999999,"caps":[]}' | base64 -w0 | tr '+/' '-_' | tr -d =)
FORGED="$CLAIMS.${G#*.}"
sleep 2
for g in "$TAMPERED:grant_signature" "$OTHER:grant_signature" "$SHORT:grant_expired" \
	"$LONG:grant_lifetime" "notagrant:grant_malformed" "$FORGED:grant_signature"; do
	is "$(code -x "$P" -H "Proxy-Authorization: Bearer ${g%:*}" http://origin.kz.test/)" 403 \
		"grant refused: ${g##*:}"
	like "$(tail -1 "$T/egress.log")" "\"reason\":\"${g##*:}\"" "recorded as ${g##*:}"
done
is "$(code -x "$P" -H "Proxy-Authorization: Basic $(printf 'run' | base64)" http://origin.kz.test/)" 403 \
	"Basic without a password: refused"

# Keep-alive: each request judged on its own.
curl -sv -x "http://run:$G@127.0.0.1:$EG_PORT" http://origin.kz.test/one http://loop.kz.test/two \
	http://origin.kz.test:22/three http://origin.kz.test/four >"$T/ka" 2>"$T/ka.err"
like "$(tr '\n' ' ' <"$T/ka")" '^origin origin.kz.test /one refused' \
	"kept-alive: a second request for a refused host is refused, not sent upstream"
like "$(grep -c 'Re-using existing connection' "$T/ka.err")" '^[1-9]' "the client did reuse its connection"
like "$(tr '\n' ' ' <"$T/ka")" 'origin origin.kz.test /four' "and the allowed host still works after"
# The host's own interface addresses are the proxy's own, even inside an
# allowed private range: the host side of the test link, 10.213.N.1.
HOSTSIDE=${EG_ORIGIN%.2}.1
is "$(code -x "$P" -H "Proxy-Authorization: Bearer $G" "http://$HOSTSIDE/")" 403 \
	"the host's own address (inside the allowed range) is refused"
like "$(grep '"reason":"own_address"' "$T/egress.log" | tail -1)" "\"host\":\"$HOSTSIDE\"" \
	"as own_address"
# So is one the host gains after the start, inside the allowed list too: a
# service on the host itself listens there (10.213.N.5 on the host side).
NEWADDR=${EG_ORIGIN%.2}.5
ip addr add "$NEWADDR/32" dev "$EG_VH"
bg "$EG_PY" "$EGDIR/origin.py" "$NEWADDR" 80
i=0; while ! bash -c "echo >/dev/tcp/$NEWADDR/80" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
t "a service listens on the address the host gained" bash -c "echo >/dev/tcp/$NEWADDR/80"
is "$(code -x "$P" -H "Proxy-Authorization: Bearer $G" "http://$NEWADDR/")" 403 \
	"an address the host gained after the proxy started is refused"
like "$(grep '"reason":"own_address"' "$T/egress.log" | tail -1)" "\"host\":\"$NEWADDR\"" \
	"as own_address"
kill "$LASTPID"
ip addr del "$NEWADDR/32" dev "$EG_VH"

# A client that shuts its writing side once its request is sent (nc -N):
# the request is followed through and answered, then the connection closed;
# a body the shutdown cut short is a 502.
shut() { printf "$1" "$G" | "$EG_PY" "$TOP/tests/egress/raw.py" "127.0.0.1:$EG_PORT" 3 shut | tr '\r\n' '  '; }
like "$(shut 'GET http://origin.kz.test/shut HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n')" \
	'^HTTP/1.1 200 .*origin origin.kz.test /shut *$' "half-closed after a GET: answered, then closed"
like "$(shut 'POST http://origin.kz.test/p HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\nContent-Length: 5\r\n\r\nhello')" \
	"^HTTP/1.1 200 .*got 5 $(printf hello | sha256sum | cut -d' ' -f1) *\$" "half-closed after a POST's body: answered"
like "$(shut 'CONNECT origin.kz.test:80 HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\nGET /t HTTP/1.1\r\nHost: origin.kz.test\r\n\r\n')" \
	'^HTTP/1.1 200 Connection established .*origin origin.kz.test /t *$' \
	"half-closed after a CONNECT and its first bytes: the tunnel carries them and the answer"
like "$(shut 'POST http://origin.kz.test/p HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\nContent-Length: 10\r\n\r\nhello')" \
	'^HTTP/1.1 502 ' "half-closed with the body cut short: 502"

# A bad grant on a connection that carried a good one is no run's: its
# refusal is not recorded under the earlier grant's run.
printf 'GET http://origin.kz.test/a HTTP/1.1\r\nHost: origin.kz.test\r\nProxy-Authorization: Bearer %s\r\n\r\nGET http://origin.kz.test/b HTTP/1.1\r\nHost: origin.kz.test\r\nProxy-Authorization: Bearer notagrant\r\n\r\n' "$G" |
	"$EG_PY" "$TOP/tests/egress/raw.py" "127.0.0.1:$EG_PORT" 3 >"$T/two"
like "$(tr '\r\n' '  ' <"$T/two")" 'origin origin.kz.test /a.*HTTP/1.1 403' \
	"one connection: a good grant's request served, then a bad grant refused"
unlike "$(grep '"reason":"grant_malformed"' "$T/egress.log" | tail -1)" '"run_hash"' \
	"the bad grant's refusal names no run (not the earlier grant's)"

# Smuggling ambiguities and bounds.
raw() { printf '%b' "$1" | "$EG_PY" "$TOP/tests/egress/raw.py" "127.0.0.1:$EG_PORT" "${2:-3}"; }
A="Proxy-Authorization: Bearer $G\r\n"
like "$(raw "POST http://origin.kz.test/p HTTP/1.1\r\nHost: o\r\n${A}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")" \
	'^HTTP/1.1 400' "Content-Length with Transfer-Encoding: refused"
like "$(raw "POST http://origin.kz.test/p HTTP/1.1\r\nHost: o\r\n${A}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")" \
	'^HTTP/1.1 400' "two Content-Lengths: refused"
like "$(raw "POST http://origin.kz.test/p HTTP/1.1\r\nHost: o\r\n${A}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")" \
	'^HTTP/1.1 502|^$' "a bad chunk size ends the exchange; nothing after it is forwarded"
like "$(raw "GET http://origin.kz.test/ HTTP/1.1\r\n${A}X-Big: $(head -c 20000 /dev/zero | tr '\0' a)\r\n\r\n")" \
	'^HTTP/1.1 431' "an oversized head: 431"
many=$(for i in $(seq 150); do printf 'X-%d: y\\r\\n' "$i"; done)
like "$(raw "GET http://origin.kz.test/ HTTP/1.1\r\n${A}${many}\r\n")" '^HTTP/1.1 400' "too many headers: 400"
start=$(date +%s)
R=$(raw "GET http://origin.kz.test/ HTTP/1.1\r\nHost: o\r\n" 8)
unlike "$R" 'timeout' "a head that never ends is cut off by the header timeout"
t "within the configured 2 s (+1)" test $(( $(date +%s) - start )) -le 4

# The refusal record: host, port and reason, nothing else from the URL.
curl -s -o /dev/null -x "http://run:$G@127.0.0.1:$EG_PORT" \
	"http://user:hunter2@loop.kz.test/secret/path?token=abc123"
sleep 0.5
E=$(grep '"host": "loop.kz.test"' "$T/audit.jsonl" | tail -1)
like "$E" '"kind": "egress_refusal"' "an egress_refusal event reached the audit sink"
like "$E" '"port": 80.*"reason": "loopback".*"run_hash": "[0-9a-f]{32}"' "with port, reason and run hash"
unlike "$(cat "$T/audit.jsonl" "$T/egress.log")" 'hunter2|secret|token|abc123|path|Bearer' \
	"no userinfo, path, query or grant in the log or the audit trail"
unlike "$(cat "$T/audit.jsonl" "$T/egress.log")" "${G:10:30}" "the grant itself appears nowhere"
done_testing

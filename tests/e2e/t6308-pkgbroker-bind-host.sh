#!/usr/bin/env bash
# The Host of a bind is checked as every request's is, before the bind
# is looked at.  On the broker's socket, as an allowed peer with a token
# bound to its uid: a bind that names the broker (kz-pkgbroker, what the
# forward sends) or a host of PKGBROKER_HOSTS binds the connection, which
# then serves; a bind with no Host, a hostile Host or a Host naming
# another origin is refused host_refused, binds nothing and closes the
# connection; so is a first request that is not a bind but names the
# broker, and, on a bound connection, any later request that does (the
# broker's own name is good for the bind alone).  Every refusal is
# audited; no token is logged.  A real kz-audit sink and a real PEP 503
# index (python3 -m http.server on loopback) behind the broker.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/pkgbroker/lib.sh"
plan 14
pb_keys
pb_audit_start || { echo "Bail out! kz-audit did not start"; exit 1; }
IDX_PORT=$(pb_port)
mkdir -p "$T/idx/simple"
printf '<a href="kzalpha/">kzalpha</a>\n' >"$T/idx/simple/index.html"
bg "$PB_PY" -m http.server --bind 127.0.0.1 --directory "$T/idx" "$IDX_PORT"
pb_wait_http "http://127.0.0.1:$IDX_PORT/simple/" 20 ||
	{ echo "Bail out! the index did not start"; exit 1; }
PB_PY_URL=http://127.0.0.1:$IDX_PORT
pb_broker_start || { echo "Bail out! kz-pkgbroker did not start"; exit 1; }
TOK=$(kz-pkgbroker token --field-key "$PB_KEY" --run bind-host-run --uid "$(id -u)")
[ -n "$TOK" ] || { echo "Bail out! no token"; exit 1; }

# conn REQUEST...: one connection to the socket; each REQUEST is
# "TARGET|HOST" ("-" as HOST sends no Host header), all with the token;
# prints each status line, "closed" once the broker has closed.
conn() {
	local r a=()
	for r; do a+=("$r|$TOK"); done
	pb_raw - "${a[@]}"
}
B=/-/kz/bind
OK='^HTTP/1\.1 200 Bound \| HTTP/1\.1 200 OK$'
REFUSED='^HTTP/1\.1 403 .*\(host_refused\) \| closed$'

like "$(conn "$B|kz-pkgbroker" "/simple/|127.0.0.1:4873")" "$OK" \
	"a bind naming the broker (what the forward sends) binds; the connection serves"
like "$(conn "$B|127.0.0.1:4873" "/simple/|127.0.0.1")" "$OK" \
	"a bind naming a host of PKGBROKER_HOSTS binds too"
like "$(conn "$B|-" "/simple/|127.0.0.1")" "$REFUSED" \
	"a bind without a Host: refused host_refused, nothing bound, closed"
like "$(conn "$B|evil.example" "/simple/|127.0.0.1")" "$REFUSED" \
	"a bind with a hostile Host: refused host_refused, closed"
like "$(conn "$B|registry.npmjs.org:443" "/simple/|127.0.0.1")" "$REFUSED" \
	"a bind with a Host naming another origin: refused host_refused, closed"
like "$(conn "$B|kz-pkgbroker.evil.example" "/simple/|127.0.0.1")" "$REFUSED" \
	"a bind with a Host that only starts with the broker's name: refused, closed"
like "$(conn "$B|" "/simple/|127.0.0.1")" "$REFUSED" \
	"a bind with an empty Host: refused, closed"
like "$(conn "/simple/|kz-pkgbroker" "$B|kz-pkgbroker")" "$REFUSED" \
	"a first request that is not a bind may not name the broker: refused, closed"
like "$(conn "http://kz-pkgbroker$B|kz-pkgbroker" "$B|kz-pkgbroker")" \
	'^HTTP/1\.1 (403|404|400) .* \| closed$' \
	"an absolute-form bind is no bind: refused, closed"
like "$(conn "$B|kz-pkgbroker" "/simple/|kz-pkgbroker" "/simple/|127.0.0.1")" \
	'^HTTP/1\.1 200 Bound \| HTTP/1\.1 403 .*\(host_refused\) \| closed$' \
	"on a bound connection the broker's own name is refused for a registry request"
like "$(conn "$B|kz-pkgbroker" "$B|kz-pkgbroker" "/simple/|127.0.0.1")" \
	'^HTTP/1\.1 200 Bound \| HTTP/1\.1 403 .*\(bind_again\) \| closed$' \
	"a second bind, even with a good Host, is still bind_again"

# On the TCP listener there is no bind, and the broker's name is no host.
R=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: kz-pkgbroker' \
	-H "Authorization: Bearer $TOK" "http://127.0.0.1:$PB_PORT/simple/")
is "$R" 403 "the TCP listener refuses the broker's name as a Host"

R=$(pb_refusals)
like "$(printf '%s' "$R" | grep -c '"host_refused"')" '^([7-9]|[1-9][0-9])$' \
	"each host refusal is audited"
unlike "$(cat "$T"/audit/* "$T/pb.log")" "${TOK:0:40}|kz/bind" \
	"no token and no bind path in any record or log"
done_testing

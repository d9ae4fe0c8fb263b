#!/usr/bin/env bash
# The destination suite: every protected class in every mode, each IP-literal
# spelling, mixed and rebinding DNS answers, names that do not resolve, run
# through `kz-egress check` and through the live proxy (raw requests, so the
# host reaches the proxy exactly as spelled).  Allowed traffic goes only to
# the test origin in this test's own network namespace; public verdicts are
# covered by check alone, which never connects.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/egress/lib.sh"
N=102

eg_netns $N || { echo "1..0 # SKIP cannot create a network namespace"; exit 0; }
eg_origin 80 || { echo "Bail out! origin did not start"; exit 1; }
O=$EG_ORIGIN
cat >"$T/zone.json" <<EOF
{"origin.kz.test": {"A": ["$O"]}, "notlisted.kz.test": {"A": ["$O"]},
 "loop.kz.test": {"A": ["127.0.0.1"]}, "loop6.kz.test": {"AAAA": ["::1"]},
 "unspec.kz.test": {"A": ["0.0.0.0"]}, "ll.kz.test": {"A": ["169.254.1.1"]},
 "ll6.kz.test": {"AAAA": ["fe80::1"]},
 "meta.kz.test": {"A": ["169.254.169.254"]},
 "meta6.kz.test": {"AAAA": ["fd00:ec2::254"]},
 "mcast.kz.test": {"A": ["224.0.0.1"]}, "mcast6.kz.test": {"AAAA": ["ff02::1"]},
 "bcast.kz.test": {"A": ["255.255.255.255"]}, "resv.kz.test": {"A": ["240.0.0.1"]},
 "doc.kz.test": {"A": ["192.0.2.1"]}, "doc6.kz.test": {"AAAA": ["2001:db8::1"]},
 "bench.kz.test": {"A": ["198.18.0.1"]}, "proto.kz.test": {"A": ["192.0.0.1"]},
 "mapped.kz.test": {"AAAA": ["::ffff:127.0.0.1"]},
 "nat64.kz.test": {"AAAA": ["64:ff9b::a9fe:a9fe"]},
 "sixtofour.kz.test": {"AAAA": ["2002:7f00:1::"]},
 "teredo.kz.test": {"AAAA": ["2001:0:4136:e378:8000:63bf:80ff:fffe"]},
 "sitelocal.kz.test": {"AAAA": ["fec0::1"]}, "discard.kz.test": {"AAAA": ["100::1"]},
 "shared.kz.test": {"A": ["100.64.0.1"]}, "private.kz.test": {"A": ["10.1.2.3"]},
 "ula.kz.test": {"AAAA": ["fd12::1"]},
 "mixed.kz.test": {"A": ["$O", "127.0.0.1"]},
 "mixed6.kz.test": {"A": ["$O"], "AAAA": ["::1"]},
 "mixedmeta.kz.test": {"A": ["$O", "169.254.169.254"]},
 "cp.kz.test": {"A": ["8.8.4.4"]}, "public.kz.test": {"A": ["93.184.216.34"]},
 "rebind.kz.test": {"A_seq": [["$O"], ["127.0.0.1"]]},
 "rebindl.kz.test": {"A_seq": [["$O"], ["127.0.0.1"]]},
 "servfail.kz.test": {"rcode": 2}}
EOF
eg_dnsd "$T/zone.json" || { echo "Bail out! dnsd did not start"; exit 1; }
eg_keys
names="loop:loopback loop6:loopback unspec:unspecified ll:link_local
ll6:link_local meta:metadata meta6:metadata mcast:multicast mcast6:multicast
bcast:broadcast resv:reserved doc:documentation doc6:documentation
bench:benchmarking proto:protocol_assignment mapped:loopback nat64:metadata
sixtofour:loopback teredo:loopback sitelocal:site_local discard:discard_only
shared:shared_address private:private_use ula:unique_local mixed:loopback
mixed6:loopback mixedmeta:metadata cp:control_plane"
allow=$(for nv in $names; do printf '%s.kz.test,' "${nv%%:*}"; done)public.kz.test

declare -A PORT
for m in isolated public_internet private_networks host_allowlist; do
	PORT[$m]=$(eg_free_port)
	cat >"$T/$m.conf" <<EOF
SANDBOX_EGRESS_MODE = $m
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$N.0/30
SANDBOX_EGRESS_HOST_ALLOWLIST = $allow
SANDBOX_EGRESS_CONTROL_PLANE_CIDRS = 8.8.4.0/24
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:${PORT[$m]}
EOF
done

# mode host port want (want: a reason, or "allow")
cases() {
	local m nv want
	for m in isolated public_internet private_networks host_allowlist; do
		for nv in $names; do
			want=${nv#*:}
			[ $m = isolated ] && want=isolated
			echo "$m ${nv%%:*}.kz.test 80 $want"
		done
	done
	cat <<EOF
private_networks origin.kz.test 80 allow
private_networks ORIGIN.KZ.TEST. 80 allow
private_networks $O 80 allow
private_networks 0x0a.213.$N.2 80 allow
private_networks 012.213.$N.2 80 allow
private_networks [::ffff:$O] 80 allow
private_networks origin.kz.test 22 port_not_allowed
private_networks origin.kz.test 8080 port_not_allowed
private_networks nx.kz.test 80 unresolvable
private_networks servfail.kz.test 80 resolve_failed
private_networks 10.213.$N.6 80 private_use
private_networks 127.1 80 loopback
private_networks 2130706433 80 loopback
private_networks 0x7f000001 80 loopback
private_networks 017700000001 80 loopback
private_networks 0x7f.1 80 loopback
private_networks 0x7f.0x0.0x0.0x1 80 loopback
private_networks 127.0.0.1. 80 loopback
private_networks [::1] 80 loopback
private_networks [0:0:0:0:0:0:0:1] 80 loopback
private_networks [::ffff:127.0.0.1] 80 loopback
private_networks [::ffff:7f00:1] 80 loopback
private_networks [::127.0.0.1] 80 loopback
private_networks [fe80::1%25eth0] 80 link_local
private_networks [64:ff9b::7f00:1] 80 loopback
private_networks [2002:7f00:1::] 80 loopback
private_networks [2001:0:4136:e378:8000:63bf:80ff:fffe] 80 loopback
private_networks 169.254.43518 80 metadata
private_networks 0xa9fea9fe 80 metadata
private_networks 0251.0376.0251.0376 80 metadata
private_networks [::ffff:a9fe:a9fe] 80 metadata
private_networks 0 80 unspecified
private_networks 1.2.3.256 80 bad_host
private_networks 0x7f.1.2.3.4 80 bad_host
private_networks 0x41414141A9FEA9FE 80 bad_host
private_networks 1.0x100000000 80 bad_host
private_networks 0x1a9fea9fe 80 bad_host
private_networks example.0x100000000 80 bad_host
private_networks 4294967296 80 bad_host
public_internet origin.kz.test 80 private_use
public_internet public.kz.test 80 allow
public_internet public.kz.test 443 allow
public_internet 93.184.216.34 443 allow
public_internet 8.8.4.4 443 control_plane
public_internet 127.1 80 loopback
public_internet 0xa9fea9fe 80 metadata
host_allowlist public.kz.test 443 allow
host_allowlist PUBLIC.kz.test. 443 allow
host_allowlist notlisted.kz.test 80 host_not_allowlisted
host_allowlist 93.184.216.34 80 host_not_allowlisted
host_allowlist 127.1 80 host_not_allowlisted
isolated origin.kz.test 80 isolated
isolated $O 80 isolated
EOF
}
cases >"$T/cases"
# Live: every refusal, and allows only in private_networks mode, where each
# one is the test origin: nothing is ever sent to a public address.
awk '$4 != "allow" || $1 == "private_networks"' "$T/cases" >"$T/live"
if awk '$4 == "allow" && $1 == "private_networks" && tolower($2) !~ /origin|10\.213|0x0a|012\./' \
	"$T/live" | grep -q .; then
	echo "Bail out! a live allow case is not the test origin"; exit 1
fi
nc=$(wc -l <"$T/cases") nl=$(wc -l <"$T/live")
plan $((nc + nl + 29 + 4 + 4 + 2))

for m in isolated public_internet private_networks host_allowlist; do
	EG_PORT=${PORT[$m]}
	eg_serve "$T/$m.conf" 2>>"$T/egress-$m.log" ||
		{ echo "Bail out! kz-egress ($m) did not start"; exit 1; }
done

verdict() { # verdict MODE HOST PORT: "allow" or the refusal reason
	local out
	out=$(kz-egress check --config "$T/$1.conf" "$2" "$3" 2>/dev/null)
	case $out in
	*'"verdict":"allow"'*) echo allow ;;
	*'"reason":"'*) out=${out#*\"reason\":\"}; echo "${out%%\"*}" ;;
	*) echo "error:$out" ;;
	esac
}
while read -r m h p want; do
	is "$(verdict "$m" "$h" "$p")" "$want" "check $m $h:$p -> $want"
done <"$T/cases"

G=$(kz-egress grant --field-key "$EG_KEY" --run destinations)
printf 'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 8\r\nConnection: close\r\n\r\nrefused\n' >"$T/refused"
live() { # live MODE METHOD TARGET
	local req
	if [ "$2" = CONNECT ]; then
		req="CONNECT $3 HTTP/1.1\r\nHost: $3\r\nProxy-Authorization: Bearer $G\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	else
		req="GET http://$3/probe?q=1 HTTP/1.1\r\nHost: $3\r\nProxy-Authorization: Bearer $G\r\nConnection: close\r\n\r\n"
	fi
	printf '%b' "$req" | "$EG_PY" "$TOP/tests/egress/raw.py" "127.0.0.1:${PORT[$1]}" 3
}
# An allowed request reaches the origin; a refusal is the one 403, byte for
# byte the same whatever the reason (the proxy is no oracle for names).
judge_live() { # judge_live WANT DESCRIPTION (the response in $T/resp)
	if [ "$1" = allow ]; then
		like "$(tr '\r\n' '  ' <"$T/resp")" '^HTTP/1.1 200 .*origin ' "$2"
	elif cmp -s "$T/resp" "$T/refused"; then
		ok 0 "$2"
	else
		ok 1 "$2"; diag "got: $(head -c 200 "$T/resp" | tr '\r\n' '  ')"
	fi
}
while read -r m h p want; do
	live "$m" GET "$h:$p" >"$T/resp"
	judge_live "$want" "live GET $m $h:$p -> $want"
done <"$T/live"
# CONNECT: every class refused before any tunnel opens; the origin tunnels.
for nv in $names origin:allow; do
	h=${nv%%:*}.kz.test want=${nv#*:}
	live private_networks CONNECT "$h:80" >"$T/resp"
	judge_live "$want" "live CONNECT $h:80 -> $want"
done

# Rebinding: each connection re-resolves; the second answer is refused.
is "$(verdict private_networks rebind.kz.test 80)" allow "rebind: first answer allowed"
is "$(verdict private_networks rebind.kz.test 80)" loopback "rebind: second answer (127.0.0.1) refused"
live private_networks GET rebindl.kz.test:80 >"$T/resp"
judge_live allow "live rebind: first connection reaches the origin"
live private_networks GET rebindl.kz.test:80 >"$T/resp"
judge_live refuse "live rebind: the next connection re-resolves and is refused"

# A host whose last label is a number of any spelling or length is an
# address or refused: none of them was ever a question to DNS (checked
# and live), while the names above were.
Q=$(cat "$T/dns.queries")
like "$Q" '^origin\.kz\.test ' "the query log records the names that were resolved"
unlike "$Q" '0x|4294967296' "no numeric host ever reached DNS"

# The operator record: reason, host and port; never path, query or grant.
L=$(cat "$T"/egress-*.log)
like "$L" '"event":"egress.refuse".*"reason":"metadata","host":"meta.kz.test","port":"80"' \
	"the refusal log names reason, host and port"
unlike "$L" 'probe|q=1' "the log carries no path or query"
unlike "$L" "${G:0:40}" "the log carries no grant"
like "$L" '"reason":"unresolvable","host":"nx.kz.test"' \
	"an unresolvable name is recorded with its reason for the operator"
done_testing

# Helpers for the kz-egress tests and benchmark; source after tests/e2e/lib.sh
# (or define on_exit/bg yourself).  Test hosts live only in network
# namespaces the test creates, on private 10.213.N.0/30 addresses.
EGDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The system interpreter: a version manager's shim costs a fork or two.
if [ -x /usr/bin/python3 ]; then EG_PY=/usr/bin/python3; else EG_PY=python3; fi

# eg_netns N: creates netns kzeg-N-$$ with 10.213.N.2/30 (host side .1) and
# sets EG_NS, EG_ORIGIN (the address inside).
eg_netns() {
	local n=$1
	EG_NS=kzeg-$n-$$
	EG_VH=kzegh$n-$$ EG_VN=kzegn$n-$$
	EG_VH=${EG_VH:0:15} EG_VN=${EG_VN:0:15}
	EG_ORIGIN=10.213.$n.2
	ip netns add "$EG_NS" || return 1
	on_exit "ip netns del $EG_NS 2>/dev/null; ip link del $EG_VH 2>/dev/null"
	ip link add "$EG_VH" type veth peer name "$EG_VN" netns "$EG_NS" || return 1
	ip addr add "10.213.$n.1/30" dev "$EG_VH"
	ip link set "$EG_VH" up
	ip netns exec "$EG_NS" ip addr add "$EG_ORIGIN/30" dev "$EG_VN"
	ip netns exec "$EG_NS" ip link set "$EG_VN" up
	ip netns exec "$EG_NS" ip link set lo up
}

# eg_origin PORT: the python origin inside $EG_NS on $EG_ORIGIN:PORT.
eg_origin() {
	bg ip netns exec "$EG_NS" "$EG_PY" "$EGDIR/origin.py" "$EG_ORIGIN" "$1"
	local i=0
	while ! ip netns exec "$EG_NS" bash -c "echo >/dev/tcp/$EG_ORIGIN/$1" 2>/dev/null; do
		i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.05
	done
}

# eg_dnsd ZONE: starts the test DNS server; sets EG_DNS (127.0.0.1:port).
# Every question it is asked is logged to $T/dns.queries ("name type").
eg_dnsd() {
	rm -f "$T/dns.port"
	: >"$T/dns.queries"
	bg "$EG_PY" "$EGDIR/dnsd.py" "$1" "$T/dns.port" "$T/dns.queries"
	local i=0
	while [ ! -s "$T/dns.port" ]; do
		i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.05
	done
	EG_DNS=127.0.0.1:$(cat "$T/dns.port")
}

# eg_site N: what most egress tests open with: eg_netns N, the origin on
# port 80 in it, and the test DNS server (EG_DNS) with $T/zone.json, in
# which origin.kz.test is EG_ORIGIN.  A part that does not start bails
# the test out (TAP "Bail out!", exit 1).
eg_site() {
	eg_netns "$1" || eg_bail "cannot create a network namespace"
	eg_origin 80 || eg_bail "origin did not start"
	printf '{"origin.kz.test": {"A": ["%s"]}}\n' "$EG_ORIGIN" >"$T/zone.json"
	eg_dnsd "$T/zone.json" || eg_bail "dnsd did not start"
}

# eg_bail WHY: ends the test as TAP's "Bail out! WHY".
eg_bail() {
	echo "Bail out! $*"
	exit 1
}

# eg_keys: a field key in $T and its grant public key; sets EG_KEY, EG_PK.
eg_keys() {
	EG_KEY=$T/field.key EG_PK=$T/grant.pub
	head -c 32 /dev/urandom >"$EG_KEY" && chmod 600 "$EG_KEY"
	kz-egress pubkey --field-key "$EG_KEY" >"$EG_PK"
}

# eg_free_port: a free TCP port on loopback.
eg_free_port() {
	"$EG_PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# eg_serve CONF: starts kz-egress serve with CONF, logs in $T/egress.log;
# waits for EG_PORT (TCP listen port in CONF).
eg_serve() {
	bg kz-egress serve --config "$1"
	EG_PID=$LASTPID
	local i=0
	while ! bash -c "echo >/dev/tcp/127.0.0.1/$EG_PORT" 2>/dev/null; do
		i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.05
	done
}

# The flood tools, in $T where every uid can read them (the tree may not
# be readable by the uids the tests take): EG_FLOOD (flood.py) and
# EG_REQ (req.py); a flood's files in $T/fl.
eg_flood_tools() {
	EG_FLOOD=$T/flood.py EG_REQ=$T/req.py
	install -m 0644 "$EGDIR/flood.py" "$EG_FLOOD"
	install -m 0644 "$EGDIR/req.py" "$EG_REQ"
	mkdir -p -m 0777 "$T/fl"
}

# eg_flood NAME CMD...: starts CMD (flood.py's run, OUT left off) in the
# background and waits until its connections are in place.
eg_flood() {
	local name=$1 i=0
	shift
	bg "$@" "$T/fl/$name"
	while [ ! -e "$T/fl/$name.ready" ]; do
		i=$((i + 1)); [ $i -gt 600 ] && return 1; sleep 0.05
	done
}

# eg_collect NAME: the flood's result, "OPEN ANSWERED REFUSED".
eg_collect() {
	local i=0
	touch "$T/fl/$1.go"
	while [ ! -e "$T/fl/$1" ]; do
		i=$((i + 1)); [ $i -gt 200 ] && break; sleep 0.05
	done
	cat "$T/fl/$1" 2>/dev/null || echo "none none none"
}

# eg_held NAME...: the floods' results (eg_collect), one after another;
# sets EG_HELD, the connections they held together (their OPENs summed).
eg_held() {
	local name r
	EG_HELD=0
	for name in "$@"; do
		r=$(eg_collect "$name")
		EG_HELD=$((EG_HELD + ${r%% *}))
	done
}

# eg_as UID CMD...: CMD as UID, group nobody, no supplementary groups.
eg_as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g nobody)" --clear-groups "$@"
}

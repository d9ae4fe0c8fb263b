# A store deployment that fails over, for the t44NN-store-* tests (sourced
# after tests/e2e/lib.sh): network namespaces the test creates, "core"
# holding a primary, two replicas and three sentinels on 10.77.0.1 (all
# with ACL user kz), and "hosts" h1 and h2 (10.77.1.2, 10.77.2.2), each on
# its own veth link to core.  Nothing leaves the namespaces.
NS=kz$$
CORE=${NS}c
PW="pw-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$PW" >"$T/store.pass"; chmod 600 "$T/store.pass"
SENT=10.77.0.1:26379,10.77.0.1:26380,10.77.0.1:26381
SRV=$(command -v valkey-server || command -v redis-server)
SEN=$(command -v valkey-sentinel || command -v redis-sentinel)
on_exit "ip netns del $CORE; ip netns del ${NS}h1; ip netns del ${NS}h2"

ha_net() {
	local i
	ip netns add "$CORE" || return 1
	ip -n "$CORE" link set lo up
	ip -n "$CORE" addr add 10.77.0.1/32 dev lo
	for i in 1 2; do
		ip netns add "${NS}h$i" || return 1
		ip -n "${NS}h$i" link set lo up
		ip -n "$CORE" link add "c$i" type veth peer name "h$i" netns "${NS}h$i"
		ip -n "$CORE" addr add "10.77.$i.1/30" dev "c$i"
		ip -n "$CORE" link set "c$i" up
		ip -n "${NS}h$i" addr add "10.77.$i.2/30" dev "h$i"
		ip -n "${NS}h$i" link set "h$i" up
		ip -n "${NS}h$i" route add 10.77.0.0/24 via "10.77.$i.1"
	done
}

# ha_node PORT [PRIMARY-PORT]: a server in core, its config 0600.
ha_node() {
	local d=$T/r$1
	mkdir -p "$d"
	{
		echo "port $1"; echo "bind 10.77.0.1"; echo "dir $d"
		echo "save \"\""; echo "appendonly no"; echo "logfile $d/log"
		echo "user default off"; echo "user kz on >$PW ~* &* +@all"
		echo "masteruser kz"; echo "masterauth $PW"
		[ -n "${2:-}" ] && echo "replicaof 10.77.0.1 $2"
	} >"$d/conf"
	chmod 600 "$d/conf"
	nsenter --net=/run/netns/"$CORE" "$SRV" "$d/conf" --daemonize no >/dev/null 2>&1 &
	_pids="$_pids $!"
	eval "NODE_$1=$!"
}

ha_sentinel() {
	local d=$T/s$1
	mkdir -p "$d"
	{
		echo "port $1"; echo "bind 10.77.0.1"; echo "dir $d"; echo "logfile $d/log"
		echo "sentinel monitor kzp 10.77.0.1 6379 2"
		echo "sentinel down-after-milliseconds kzp ${HA_DOWN_MS:-1000}"
		echo "sentinel failover-timeout kzp 3000"
		echo "sentinel parallel-syncs kzp 2"
		echo "sentinel auth-user kzp kz"; echo "sentinel auth-pass kzp $PW"
		echo "sentinel sentinel-user kz"; echo "sentinel sentinel-pass $PW"
		echo "user default off"; echo "user kz on >$PW ~* &* +@all"
	} >"$d/conf"
	chmod 600 "$d/conf"
	nsenter --net=/run/netns/"$CORE" "$SEN" "$d/conf" --daemonize no >/dev/null 2>&1 &
	_pids="$_pids $!"
}

rc_core() { # rc_core PORT CMD...: redis-cli in core as kz
	nsenter --net=/run/netns/"$CORE" redis-cli -h 10.77.0.1 -p "$1" --user kz --pass "$PW" \
		--no-auth-warning "${@:2}"
}
primary_port() { rc_core 26379 SENTINEL get-master-addr-by-name kzp 2>/dev/null | sed -n 2p; }

ha_up() {
	local i
	ha_net || return 1
	ha_node 6379; sleep 0.3
	ha_node 6380 6379; ha_node 6381 6379
	for i in 26379 26380 26381; do ha_sentinel $i; done
	# Both replicas in sync and every sentinel sees the two others.
	for i in $(seq 100); do
		[ "$(rc_core 6379 INFO replication 2>/dev/null | grep -c 'state=online')" = 2 ] &&
			[ "$(rc_core 26379 SENTINEL sentinels kzp 2>/dev/null | grep -c '^name$')" = 2 ] && return 0
		sleep 0.1
	done
	return 1
}

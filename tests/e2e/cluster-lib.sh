# A three-primary Redis/Valkey Cluster on 127.0.0.1 for the cluster tests
# (t4403, t4404), sourced after lib.sh.  cluster_start BASEPORT starts
# nodes on BASEPORT..BASEPORT+2 (their cluster buses 10000 above), or the
# first such three ports above it of which none is in use (test files run
# two at a time), creates the cluster and waits until it serves; then B is
# the first port, SLOT the deployment's slot, and owner() prints the port
# of the node serving it.  Each test's range is its own: t4404 from 11000,
# t4403 from 15000 (buses 21000-28999), below the host's ephemeral ports.
cli() { redis-cli -p "$@"; }

cluster_start() {
	local srv p i
	srv=$(command -v valkey-server || command -v redis-server)
	B=$1
	while ss -Htln | awk '{print $4}' | grep -Eq ":($B|$((B + 1))|$((B + 2))|$((B + 10000))|$((B + 10001))|$((B + 10002)))\$"; do
		B=$((B + 3))
	done
	for p in $B $((B + 1)) $((B + 2)); do
		mkdir -p "$T/n$p"
		bg "$srv" --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
			--cluster-config-file "$T/n$p/nodes.conf" --dir "$T/n$p" --save '' \
			--appendonly no --daemonize no --loglevel warning --logfile "$T/n$p/log"
	done
	for p in $B $((B + 1)) $((B + 2)); do
		for i in $(seq 50); do cli "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
	done
	redis-cli --cluster create 127.0.0.1:$B 127.0.0.1:$((B + 1)) 127.0.0.1:$((B + 2)) \
		--cluster-yes >"$T/create.log" 2>&1
	for i in $(seq 100); do cli "$B" cluster info | grep -q 'cluster_state:ok' && break; sleep 0.1; done
	SLOT=$(cli "$B" cluster keyslot 'kz:{default}:')
}

owner() { # the port of the node serving SLOT
	cli "$B" cluster nodes | awk -v s="$SLOT" '$3 ~ /master/ { for (i = 9; i <= NF; i++) {
		split($i, r, "-"); if (r[2] == "") r[2] = r[1]; if (s >= r[1] && s <= r[2]) { sub(/@.*/, "", $2); sub(/.*:/, "", $2); print $2 } } }'
}
id_of() { cli "$1" cluster myid; }

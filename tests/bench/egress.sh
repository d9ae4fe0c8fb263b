#!/usr/bin/env bash
# kz-egress benchmark (not a pass/fail test).  An nginx-light origin in its
# own network namespace (10.213.200.2), then with the same wrk connections,
# threads and duration: (a) straight to the origin, (b) through squid,
# (c) through tinyproxy, (d) through kz-egress with a valid grant and the
# origin named by a name the test DNS server answers (every new upstream
# connection re-resolves).  (e) bulk bytes through a CONNECT tunnel vs a
# direct connection.  (f) memory per idle tunnel with 5,000 open tunnels.
# Needs root, wrk, nginx-light, squid, tinyproxy, curl, python3.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$TOP/bin:$PATH
PHASES=${PHASES:-"wrk bulk tunnels"}
CONNS=${CONNS:-32} THREADS=${THREADS:-2} DUR=${DUR:-10s}
TUNNELS=${TUNNELS:-5000}
T=$(mktemp -d /tmp/kz-bench-egress.XXXXXX)
chmod 0755 "$T"
_pids="" _cleanups=""
bg() { "$@" & _pids="$_pids $!"; LASTPID=$!; }
on_exit() { _cleanups="$1;$_cleanups"; }
cleanup() {
	for p in $_pids; do kill "$p" 2>/dev/null; done
	sleep 0.3
	for p in $_pids; do kill -9 "$p" 2>/dev/null; done
	eval "$_cleanups" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
. "$TOP/tests/egress/lib.sh"

for b in wrk nginx squid tinyproxy curl python3; do
	command -v "$b" >/dev/null || { echo "bench: $b missing (make deps-bench)"; exit 3; }
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
wait_tcp() { # wait_tcp [NETNS] ADDR PORT
	local ns=() i=0
	if [ $# = 3 ]; then ns=(ip netns exec "$1"); shift; fi
	while ! "${ns[@]}" bash -c "echo >/dev/tcp/$1/$2" 2>/dev/null; do
		i=$((i + 1)); [ $i -gt 200 ] && { echo "bench: $1:$2 not up"; exit 3; }
		sleep 0.05
	done
}

# ---- the origin ----
eg_netns 200 || { echo "bench: cannot create the test netns"; exit 3; }
O=$EG_ORIGIN
mkdir -p "$T/www" "$T/nginx"
printf 'hello from the bench origin\n' >"$T/www/index.html"
truncate -s 1G "$T/www/bulk"
cat >"$T/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 65536;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log;
daemon off;
events { worker_connections 16384; }
http {
	access_log off;
	sendfile on;
	keepalive_requests 10000000;
	keepalive_timeout 300s;
	client_body_temp_path $T/nginx;
	proxy_temp_path $T/nginx;
	fastcgi_temp_path $T/nginx;
	uwsgi_temp_path $T/nginx;
	scgi_temp_path $T/nginx;
	server {
		listen $O:80;
		root $T/www;
	}
}
EOF
bg ip netns exec "$EG_NS" nginx -c "$T/nginx.conf" -e "$T/nginx/error.log"
wait_tcp "$EG_NS" "$O" 80

# ---- the proxies ----
SQ=$(eg_free_port) TP=$(eg_free_port) EP=$(eg_free_port)
mkdir -p "$T/squid"
chown proxy "$T/squid" 2>/dev/null
cat >"$T/squid.conf" <<EOF
http_port 127.0.0.1:$SQ
acl localnet src 127.0.0.1/32
http_access allow localnet
http_access deny all
# Forwarding, not caching (every request must reach the origin, as it
# does through the other proxies); access logging as Debian ships it.
cache deny all
access_log daemon:$T/squid/access.log squid
cache_log $T/squid/cache.log
pid_filename $T/squid/squid.pid
coredump_dir $T/squid
client_persistent_connections on
server_persistent_connections on
shutdown_lifetime 1 seconds
EOF
bg squid -N -f "$T/squid.conf" 2>"$T/squid/stderr"
cat >"$T/tinyproxy.conf" <<EOF
Port $TP
Listen 127.0.0.1
Timeout 600
MaxClients 1024
LogLevel Critical
LogFile "$T/tinyproxy.log"
Allow 127.0.0.1
EOF
bg tinyproxy -d -c "$T/tinyproxy.conf"

cat >"$T/zone.json" <<EOF
{"bench.kz.test": {"A": ["$O"]}}
EOF
eg_dnsd "$T/zone.json" || { echo "bench: dnsd did not start"; exit 3; }
eg_keys
cat >"$T/egress.conf" <<EOF
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.200.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $EG_PK
SANDBOX_EGRESS_LISTEN = 127.0.0.1:$EP
SANDBOX_EGRESS_MAX_CONNECTIONS = 20000
EOF
GRANT=$(kz-egress grant --field-key "$EG_KEY" --run bench)
KZ_LOG_LEVEL=warn bg kz-egress serve --config "$T/egress.conf" 2>"$T/egress.log"
KPID=$LASTPID
wait_tcp 127.0.0.1 "$SQ"; wait_tcp 127.0.0.1 "$TP"; wait_tcp 127.0.0.1 "$EP"

# ---- (a)-(d): wrk ----
phase() { case " $PHASES " in *" $1 "*) return 0;; esac; return 1; }
if phase wrk; then
proxy_lua() { # proxy_lua HOST [AUTH]: absolute-form requests for wrk
	echo "wrk.path = \"http://$1/\""
	echo "wrk.headers[\"Host\"] = \"$1\""
	if [ -n "${2:-}" ]; then
		echo "wrk.headers[\"Proxy-Authorization\"] = \"$2\""
	fi
}
proxy_lua "$O" >"$T/sq.lua"
proxy_lua bench.kz.test "Bearer $GRANT" >"$T/kz.lua"

declare -A RPS P50 P99
run_wrk() { # run_wrk NAME URL [SCRIPT]
	local name=$1 url=$2 out
	shift 2
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DUR" --latency "$@" "$url" 2>&1)
	RPS[$name]=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
	P50[$name]=$(awk '$1 == "50%" {print $2}' <<<"$out")
	P99[$name]=$(awk '$1 == "99%" {print $2}' <<<"$out")
	if [ -z "${RPS[$name]}" ]; then echo "$out" | sed 's/^/#   /'; RPS[$name]=0; fi
	if grep -q "Non-2xx" <<<"$out"; then echo "# $name: $(grep Non-2xx <<<"$out")"; fi
}
echo "# wrk -t$THREADS -c$CONNS -d$DUR, origin nginx-light in netns $EG_NS"
run_wrk direct "http://$O/"
run_wrk squid "http://127.0.0.1:$SQ" -s "$T/sq.lua"
run_wrk tinyproxy "http://127.0.0.1:$TP" -s "$T/sq.lua"
run_wrk kz-egress "http://127.0.0.1:$EP" -s "$T/kz.lua"
printf '%-12s %12s %10s %10s\n' target req/s p50 p99
for n in direct squid tinyproxy kz-egress; do
	printf '%-12s %12s %10s %10s\n' "$n" "${RPS[$n]}" "${P50[$n]}" "${P99[$n]}"
done
echo "ratio d/a (kz-egress/direct):    $(ratio "${RPS[kz-egress]}" "${RPS[direct]}")  (target >= 0.5)"
echo "ratio d/b (kz-egress/squid):     $(ratio "${RPS[kz-egress]}" "${RPS[squid]}")  (target >= 2.5)"
echo "ratio d/c (kz-egress/tinyproxy): $(ratio "${RPS[kz-egress]}" "${RPS[tinyproxy]}")"

fi

# ---- (e): bulk through a CONNECT tunnel ----
if phase bulk; then
bulk() { curl -s -o /dev/null -w '%{speed_download}' "$@"; }
# 1 GiB each; one warm-up, then direct and tunnel alternately, twice.
bulk "http://$O/bulk" >/dev/null
D1=0 D2=0
for i in 1 2; do
	D1=$(awk -v a="$D1" -v b="$(bulk "http://$O/bulk")" 'BEGIN { print a + b / 2 }')
	D2=$(awk -v a="$D2" -v b="$(bulk -p -x "http://run:$GRANT@127.0.0.1:$EP" \
		"http://bench.kz.test/bulk")" 'BEGIN { print a + b / 2 }')
done
mib() { awk -v v="$1" 'BEGIN { printf "%.0f MiB/s", v / 1048576 }'; }
echo "bulk direct:           $(mib "$D1")"
echo "bulk CONNECT tunnel:   $(mib "$D2")"
echo "ratio tunnel/direct:   $(ratio "$D2" "$D1")  (target >= 0.8)"

fi

# ---- (f): memory per idle tunnel ----
if phase tunnels; then
rss() { awk '/^VmRSS/ {print $2}' "/proc/$KPID/status"; }
R0=$(rss)
cat >"$T/tunnels.py" <<'EOF'
import resource, socket, sys, time
n, port, grant, dest = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks, ok = [], 0
req = ("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Bearer %s\r\n\r\n"
       % (dest, dest, grant)).encode()
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    if s.recv(64).startswith(b"HTTP/1.1 200"):
        ok += 1
    socks.append(s)
print(ok, flush=True)
time.sleep(3600)
EOF
bg "$EG_PY" "$T/tunnels.py" "$TUNNELS" "$EP" "$GRANT" "bench.kz.test:80" >"$T/tunnels.out"
TPID=$LASTPID
i=0
while [ ! -s "$T/tunnels.out" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
R1=$(rss)
OPEN=$(cat "$T/tunnels.out")
echo "idle tunnels open:     ${OPEN:-0} of $TUNNELS"
echo "kz-egress RSS:         ${R0} KiB before, ${R1} KiB with the tunnels"
awk -v a="$R0" -v b="$R1" -v n="${OPEN:-0}" 'BEGIN { if (n > 0) printf "memory per idle tunnel: %.1f KiB  (target <= 16 KiB)\n", (b - a) / n }'
kill "$TPID" 2>/dev/null
R=$(grep -o '"reason":"[a-z_]*"' "$T/egress.log" | sort | uniq -c | tr '\n' ' ')
[ -n "$R" ] && echo "# kz-egress refusals during the run: $R"
fi

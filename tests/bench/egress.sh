#!/usr/bin/env bash
# kz-egress benchmark (not a pass/fail test).  An nginx-light origin in its
# own network namespace (10.213.200.2), then with the same wrk connections,
# threads and duration: (a) straight to the origin, (b) through squid,
# (c) through tinyproxy, (d) through kz-egress with a valid grant and the
# origin named by a name the test DNS server answers (every new upstream
# connection re-resolves), ROUNDS rounds with the targets interleaved,
# with each server's CPU per request.  (e) bulk bytes through a CONNECT
# tunnel vs a direct connection, BULK_ROUNDS alternating rounds.  Ratios
# are the median of the rounds' ratios (the ratio of the medians beside
# it).  (f) memory per idle tunnel with 5,000 open tunnels.  The machine
# may be shared: the load average and the host's steal time are printed.
# Beside them, two reference points for what a proxy in the path costs on
# this machine, in the same rounds: haproxy as a bare TCP relay to the
# origin (it parses nothing and checks nothing) and as an HTTP reverse
# proxy (it parses, and keeps connections to the origin alive, but
# resolves no name and judges no destination); and the relay's bulk
# throughput (spliced) beside direct transfers of its own.
# Needs root, wrk, nginx-light, squid, tinyproxy, haproxy, curl, python3.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=$TOP/bin:$PATH
PHASES=${PHASES:-"wrk bulk tunnels"}
CONNS=${CONNS:-32} THREADS=${THREADS:-2} DUR=${DUR:-10s} ROUNDS=${ROUNDS:-3}
BULK_ROUNDS=${BULK_ROUNDS:-5}
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

for b in wrk nginx squid tinyproxy haproxy curl python3; do
	command -v "$b" >/dev/null || { echo "bench: $b missing (make deps-bench)"; exit 3; }
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

. "$TOP/tests/bench/steal.bash"
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
# The reference points: haproxy relaying bytes to the origin without
# reading them (mode tcp, spliced both ways through 1 MiB pipes), and as an
# HTTP reverse proxy; as many threads as kz-egress has by default (the
# CPUs).
RL=$(eg_free_port) HP=$(eg_free_port)
cat >"$T/haproxy.cfg" <<EOF
global
	maxconn 4096
	nbthread $(nproc)
	tune.pipesize 1048576
defaults
	timeout connect 5s
	timeout client 300s
	timeout server 300s
	timeout http-keep-alive 300s
listen relay
	mode tcp
	bind 127.0.0.1:$RL
	option splice-request
	option splice-response
	server origin $O:80
listen reverse
	mode http
	bind 127.0.0.1:$HP
	http-reuse always
	server origin $O:80
EOF
bg haproxy -db -f "$T/haproxy.cfg" 2>"$T/haproxy.log"

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
# KZ_THREADS: the daemon's worker threads (default: its own default).
if [ -n "${KZ_THREADS:-}" ]; then
	echo "SANDBOX_EGRESS_THREADS = $KZ_THREADS" >>"$T/egress.conf"
fi
GRANT=$(kz-egress grant --field-key "$EG_KEY" --run bench)
KZ_LOG_LEVEL=warn bg kz-egress serve --config "$T/egress.conf" 2>"$T/egress.log"
KPID=$LASTPID
wait_tcp 127.0.0.1 "$SQ"; wait_tcp 127.0.0.1 "$TP"; wait_tcp 127.0.0.1 "$EP"
wait_tcp 127.0.0.1 "$RL"; wait_tcp 127.0.0.1 "$HP"

# CPU of a process and its children (threads included), in clock ticks.
ticks() {
	local p t=0
	for p in $1 $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		t=$((t + $(awk '{print $14 + $15}' /proc/"$p"/stat 2>/dev/null || echo 0)))
	done
	echo "$t"
}
HZ=$(getconf CLK_TCK)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

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

declare -A RPS P50 P99 RUNS CPU
run_wrk() { # run_wrk NAME PID URL [SCRIPT]: one round; PID's CPU is counted
	local name=$1 pid=$2 url=$3 out c0 c1 r n
	shift 3
	c0=$(ticks "$pid")
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DUR" --latency "$@" "$url" 2>&1)
	c1=$(ticks "$pid")
	r=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	if [ -z "$r" ]; then echo "$out" | sed 's/^/#   /'; r=0 n=0; fi
	if grep -q "Non-2xx" <<<"$out"; then echo "# $name: $(grep Non-2xx <<<"$out")"; fi
	RUNS[$name]="${RUNS[$name]:-} $r"
	# the latency of the round closest to the median is kept
	P50[$name:$r]=$(awk '$1 == "50%" {print $2}' <<<"$out")
	P99[$name:$r]=$(awk '$1 == "99%" {print $2}' <<<"$out")
	if [ "$n" -gt 0 ]; then
		CPU[$name]="${CPU[$name]:-} $(awk -v c=$((c1 - c0)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.1f", c / hz * 1e6 / n }')"
	fi
}
NGINX=$(cat "$T/nginx/nginx.pid")
SQPID=$(pgrep -f "squid -N -f $T/squid.conf" | head -1)
TPPID=$(pgrep -f "tinyproxy -d -c $T/tinyproxy.conf" | head -1)
HAPID=$(pgrep -f "haproxy -db -f $T/haproxy.cfg" | head -1)
echo "# wrk -t$THREADS -c$CONNS -d$DUR, $ROUNDS rounds, targets interleaved; origin nginx-light in netns $EG_NS"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
ST0=$(steal)
for i in $(seq "$ROUNDS"); do
	run_wrk direct "$NGINX" "http://$O/"
	run_wrk squid "$SQPID" "http://127.0.0.1:$SQ" -s "$T/sq.lua"
	run_wrk tinyproxy "$TPPID" "http://127.0.0.1:$TP" -s "$T/sq.lua"
	run_wrk kz-egress "$KPID" "http://127.0.0.1:$EP" -s "$T/kz.lua"
	run_wrk relay "$HAPID" "http://127.0.0.1:$RL/" -H "Host: $O"
	run_wrk haproxy "$HAPID" "http://127.0.0.1:$HP/" -H "Host: $O"
done
echo "# load average after:  $(cut -d' ' -f1-3 /proc/loadavg); CPU time stolen by the host during the rounds: $(steal_since "$ST0")"
printf '%-12s %12s %10s %10s %12s  %s\n' target "req/s(med)" p50 p99 "cpu us/req" "rounds req/s"
for n in direct squid tinyproxy kz-egress relay haproxy; do
	RPS[$n]=$(tr ' ' '\n' <<<"${RUNS[$n]}" | grep . | median)
	m=$(tr ' ' '\n' <<<"${RUNS[$n]}" | grep . | awk -v m="${RPS[$n]}" '{ d = $1 - m; d = d < 0 ? -d : d; if (NR == 1 || d < b) { b = d; r = $1 } } END { print r }')
	c=$(tr ' ' '\n' <<<"${CPU[$n]:-}" | grep . | median)
	printf '%-12s %12s %10s %10s %12s  %s\n' "$n" "${RPS[$n]}" "${P50[$n:$m]:-}" "${P99[$n:$m]:-}" "$c" "${RUNS[$n]# }"
done
echo "# cpu us/req: CPU time of the serving process and its children per request (direct: nginx); relay: haproxy mode tcp, haproxy: mode http, both to the origin"
# Each round ran the four targets back to back: the median of the
# rounds' ratios is the figure least moved by load that comes and goes
# (as for the bulk ratio below); the ratio of the medians is beside it.
rratio() { # rratio NUM DEN: median over rounds of NUM's req/s / DEN's
	paste <(tr ' ' '\n' <<<"${RUNS[$1]}" | grep .) <(tr ' ' '\n' <<<"${RUNS[$2]}" | grep .) |
		awk '$2 > 0 { print $1 / $2 }' | median | awk '{ printf "%.2f", $1 }'
}
for r in "d/a direct 0.5" "d/b squid 2.5" "d/c tinyproxy"; do
	set -- $r
	printf 'ratio %s (kz-egress/%s):%*s%s  (median of the rounds'"'"' ratios; of the medians %s%s)\n' \
		"$1" "$2" $((10 - ${#2})) '' "$(rratio kz-egress "$2")" "$(ratio "${RPS[kz-egress]}" "${RPS[$2]}")" \
		"${3:+; target >= $3}"
done
# The same ratios for the reference points.
printf 'reference: haproxy tcp relay/direct %s, relay/squid %s; haproxy http/direct %s, haproxy http/squid %s  (median of the rounds'"'"' ratios)\n' \
	"$(rratio relay direct)" "$(rratio relay squid)" "$(rratio haproxy direct)" "$(rratio haproxy squid)"

fi

# ---- (e): bulk through a CONNECT tunnel ----
if phase bulk; then
bulk() { curl -s -o /dev/null -w '%{speed_download}' "$@"; }
# Busy CPU of the whole machine (all CPUs, user + system), in clock ticks:
# with curl, kz-egress and nginx on two cores, a transfer that keeps it
# near 2 CPU-seconds per second is bounded by the CPUs, not by one process.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
declare -A BUSY NGX XN
xfer() { # xfer direct|tunnel|relay: one 1 GiB transfer into XV; its CPU and count are added up
	local k=$1 b0 n0 v
	b0=$(busy) n0=$(ticks "$NGINX")
	if [ "$k" = direct ]; then
		v=$(bulk "http://$O/bulk")
	elif [ "$k" = relay ]; then
		v=$(bulk -H "Host: $O" "http://127.0.0.1:$RL/bulk")
	else
		v=$(bulk -p -x "http://run:$GRANT@127.0.0.1:$EP" "http://bench.kz.test/bulk")
	fi
	BUSY[$k]=$((${BUSY[$k]:-0} + $(busy) - b0))
	NGX[$k]=$((${NGX[$k]:-0} + $(ticks "$NGINX") - n0))
	XN[$k]=$((${XN[$k]:-0} + 1))
	XV=$v
}
NGINX=$(cat "$T/nginx/nginx.pid")
# BULK_PIN=1: curl on CPU 0, nginx and kz-egress on CPU 1, the same for
# the direct and the tunnelled transfers (printed below when set).
if [ "${BULK_PIN:-0}" = 1 ]; then
	bulk() { taskset -c 0 curl -s -o /dev/null -w '%{speed_download}' "$@"; }
	for p in "$NGINX" $(cat /proc/"$NGINX"/task/*/children) "$KPID"; do
		taskset -a -p -c 1 "$p" >/dev/null
	done
fi
# 1 GiB each: one warm-up of each, then BULK_ROUNDS pairs, the order
# alternating within each pair; medians compared.
bulk "http://$O/bulk" >/dev/null
bulk -p -x "http://run:$GRANT@127.0.0.1:$EP" "http://bench.kz.test/bulk" >/dev/null
DL="" TL="" c0=$(ticks "$KPID") ST0=$(steal)
for i in $(seq "$BULK_ROUNDS"); do
	if [ $((i % 2)) = 1 ]; then
		xfer direct; DL="$DL $XV"
		xfer tunnel; TL="$TL $XV"
	else
		xfer tunnel; TL="$TL $XV"
		xfer direct; DL="$DL $XV"
	fi
done
c1=$(ticks "$KPID")
# The relay's rounds after kz-egress's (its CPU above is kz-egress's
# alone), each beside a direct transfer of its own.
RLL="" RD=""
for i in $(seq "$BULK_ROUNDS"); do
	xfer relay; RLL="$RLL $XV"
	xfer direct; RD="$RD $XV"
done
D1=$(tr ' ' '\n' <<<"$DL" | grep . | median)
D2=$(tr ' ' '\n' <<<"$TL" | grep . | median)
mib() { awk -v v="$1" 'BEGIN { printf "%.0f MiB/s", v / 1048576 }'; }
mibs() { for v in $1; do printf '%s ' "$(awk -v v="$v" 'BEGIN { printf "%.0f", v / 1048576 }')"; done; }
echo "# bulk: 1 GiB per transfer, $BULK_ROUNDS rounds each, load average $(cut -d' ' -f1-3 /proc/loadavg), CPU time stolen by the host $(steal_since "$ST0")"
echo "bulk direct:           $(mib "$D1") (median; rounds: $(mibs "$DL")MiB/s)"
echo "bulk CONNECT tunnel:   $(mib "$D2") (median; rounds: $(mibs "$TL")MiB/s)"
echo "kz-egress CPU per GiB tunnelled: $(awk -v c=$((c1 - c0)) -v hz="$HZ" -v n="$BULK_ROUNDS" 'BEGIN { printf "%.0f ms", c / hz * 1000 / n }')"
# pergib KIND TICKS: per transfer of that kind (the direct ones ran beside
# the tunnel's rounds and beside the relay's: twice as many as the others).
pergib() { awk -v c="$2" -v hz="$HZ" -v n="${XN[$1]}" 'BEGIN { printf "%.0f ms", c / hz * 1000 / n }'; }
echo "# CPU per GiB, direct: machine $(pergib direct "${BUSY[direct]}"), nginx $(pergib direct "${NGX[direct]}");" \
	"tunnel: machine $(pergib tunnel "${BUSY[tunnel]}"), nginx $(pergib tunnel "${NGX[tunnel]}"), kz-egress as above" \
	"(curl and the kernel's loopback work are the rest of the machine's)"
[ "${BULK_PIN:-0}" = 1 ] && echo "# pinned: curl on CPU 0, nginx and kz-egress on CPU 1, for both"
# Each round's pair ran back to back, so its ratio saw one load: the
# median of the rounds' ratios is the figure least moved by other work.
PR=$(paste <(tr ' ' '\n' <<<"$DL" | grep .) <(tr ' ' '\n' <<<"$TL" | grep .) |
	awk '$1 > 0 { print $2 / $1 }' | median)
echo "ratio tunnel/direct:   $(awk -v r="$PR" 'BEGIN { printf "%.2f", r }')  (median of the rounds' ratios; of the medians $(ratio "$D2" "$D1"); target >= 0.8)"
RR=$(paste <(tr ' ' '\n' <<<"$RD" | grep .) <(tr ' ' '\n' <<<"$RLL" | grep .) |
	awk '$1 > 0 { print $2 / $1 }' | median)
echo "reference: haproxy tcp relay (spliced) $(mib "$(tr ' ' '\n' <<<"$RLL" | grep . | median)") (rounds: $(mibs "$RLL")MiB/s); relay/direct $(awk -v r="$RR" 'BEGIN { printf "%.2f", r }') (median of its rounds' ratios)"

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
if [ -n "$R" ]; then
	echo "# kz-egress refusals during the run: $R"
fi
fi
# A benchmark prints figures: a run that got this far exits 0 (the status
# of the last test above is not the run's).
exit 0

#!/bin/bash
# SANDBOX_RUNTIME=gvisor with the real runsc: the code runs on gVisor's
# kernel (its uname, /proc/version and /proc are gVisor's), with
# kz-sandbox's boundary still around it (ids, no capabilities, read-only
# root, bounded workspace, no network, kz-sandbox's own filter inside
# gVisor); the relay reaches the code over the run's loopback; a served
# worker keeps one sandbox for the lease and resets with positive
# evidence; a passed descriptor reaches the code; runsc missing or failing
# refuses the worker or the run, naming the step, and nothing runs.
# What runsc 20221219 gets wrong for ordinary programs works there through
# kz-gvisor-compat.so (ls -l, stat); a blocking read of a TCP socket waits,
# on gVisor's own network stack, without it.
# e2e: alone (gVisor on the ptrace platform takes what CPU there is)
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
RUNSC=${RUNSC:-/usr/bin/runsc}
[ -x "$RUNSC" ] || { echo "1..0 # SKIP runsc is not installed (make deps)"; exit 0; }
plan 62
export SANDBOX_RUNTIME=gvisor SANDBOX_STATE_DIR=$T/state
gv() { "$SB" run --timeout 30 --workspace-size 4M "$@"; }

# One run answers most questions, a line KEY=VALUE each (every one-shot
# run is a gVisor boot of its own, hundreds of milliseconds).
echo "host-secret-$$" >"$T/secret"
KZ_SECRET_TEST=worker-secret-$$ gv -- /bin/sh -c '
	echo "uname=$(uname -r)"; echo "version=$(head -c 200 /proc/version)"
	set -- /proc/[0-9]*; echo "nproc=$#"
	echo "cmdlines=$(cat /proc/[0-9]*/cmdline | tr "\0" " ")"
	echo "uptime=$(cut -d. -f1 /proc/uptime)"
	echo "ids=$(id -u) $(id -g) $(id -G)"
	echo "caps=$(grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb)" /proc/self/status | awk "{print \$2}" | sort -u | tr "\n" " ")"
	echo "seccomp=$(grep Seccomp: /proc/self/status | awk "{print \$2}")"
	/usr/bin/python3 -c "import ctypes
print(\"nnp=%d\" % ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))
print(\"secret=%s\" % (\"worker-secret\" in open(\"/proc/1/environ\", \"rb\").read().decode(\"latin1\")))
print(\"fstatat=%d\" % ctypes.CDLL(None).fstatat(-100, b\"/\", ctypes.create_string_buffer(256), 0x800))"
	c=""
	ls -l / >/dev/null 2>&1 || c="$c ls-l"
	[ "$(stat -c %u /workspace 2>/dev/null)" = "$(id -u)" ] || c="$c stat"
	mkdir /tmp/d && echo x >/tmp/d/f && touch -d @86400 /tmp/d/f && cp -a /tmp/d /tmp/e 2>/dev/null &&
		[ "$(ls -ln --time-style=+%s /tmp/e/f 2>/dev/null | awk "{print \$3, \$6}")" = "$(id -u) 86400" ] || c="$c cp-a"
	[ "$(du -s /tmp/d 2>/dev/null | cut -f2)" = /tmp/d ] || c="$c du"
	echo "coreutils=${c:-ok}"
	w=""
	dmesg >/dev/null 2>&1 && w="$w syslog"
	unshare -U true 2>/dev/null && w="$w userns"
	echo "withheld=${w:-none}"
	e=""
	for f in /usr/x /etc/x /etc/ld.so.preload /.kz-gvisor-loader /.kz-gvisor-compat.so /.kz-filter /x; do (echo x >$f) 2>/dev/null && e="$e $f"; done
	echo "written=${e:-none}"
	r=""
	for f in '"$T"'/secret /etc/shadow /root /var/lib; do [ -e $f ] && r="$r $f"; done
	echo "seen=${r:-none}"
	head -c 5M /dev/zero >/workspace/big 2>/dev/null && echo "ws=unbounded" || echo "ws=full"
	echo "ifaces=$(awk -F: "NR>2 {print \$1}" /proc/net/dev | tr -d " " | sort | tr "\n" " ")"
' >"$T/one" 2>"$T/one.err"
val() { sed -n "s/^$1=//p" "$T/one"; }
host=$(uname -r) hup=$(cut -d. -f1 /proc/uptime)
is "$(val uname)" "4.4.0" "uname -r inside is gVisor's (4.4.0), not the host's ($host)"
unlike "$(val version)" "$host" "/proc/version does not name the host's kernel"
t "the code's /proc lists only the code's own processes (gVisor's pid namespace)" test "$(val nproc)" -le 4
unlike "$(val cmdlines)" "kz-sandbox serve|runsc|kz-e2e" "no host process (agent, runsc) is visible in /proc"
# sysinfo and /proc/uptime are answered by gVisor's kernel: its uptime is
# the sandbox's (seconds), not the host's.
t "the code's uptime is its sandbox's ($(val uptime) s), not the host's ($hup s)" test "$(val uptime)" -lt "$hup"
is "$(val ids)" "2100000000 2100000000 2100000000" "the code runs as the sandbox uid and gid, no other group"
is "$(val caps)" "0000000000000000 " "every capability set is empty"
is "$(val seccomp)" "2" "a seccomp filter is loaded (mode 2) in gVisor's kernel"
# What t1102 reads where gVisor shows nothing (t1121 marks those TODO).
is "$(val nnp) $(val secret)" "1 False" "no_new_privs is set (prctl), and pid 1 holds no worker secret"
is "$(val withheld)" "none" "kz-sandbox's filter refuses syslog and unshare inside gVisor too"
is "$(val written)" "none" "the root view is read-only (/usr, /etc, the loader, the preload, the filter, /)"
# Debian 12's runsc fails statx(2) and fstatat(2) with AT_NO_AUTOMOUNT
# (EINVAL), which coreutils passes; the preloaded object clears it.
is "$(val coreutils)" "ok" "ls -l, stat, cp -a and du work inside gVisor"
is "$(val fstatat)" "0" "fstatat(2) with AT_NO_AUTOMOUNT succeeds there (libc's, preloaded)"
is "$(val seen)" "none" "host files outside the view are invisible"
is "$(val ws)" "full" "the workspace is bounded (4M)"
is "$(val ifaces)" "lo " "only a loopback interface exists"
rc_is 1 "the wall clock stops a run that would go on" gv --timeout 3 -- /bin/sh -c 'sleep 30'
like "$(cat "$T/.out")" "timeout" "and says so"
pgrep -f "runsc.*$T/state" >/dev/null
tnot "no runsc, gofer or sandbox of the stopped run is left on the host" test $? = 0

# The egress relay, reached from inside gVisor over the run's loopback:
# a stand-in egress socket that answers one request with its own line.
python3 -c 'import socket,os,sys,time
p=sys.argv[1]; s=socket.socket(socket.AF_UNIX); s.bind(p); s.listen(4)
print("up", flush=True)
while True:
	c,_=s.accept(); d=b""
	while b"\r\n\r\n" not in d:
		b=c.recv(4096)
		if not b: break
		d+=b
	time.sleep(0.3)
	c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nrelay-ok\n"); c.close()' "$T/egress.sock" >"$T/egress.up" &
_pids="$_pids $!"
for i in $(seq 50); do [ -s "$T/egress.up" ] && break; sleep 0.05; done
echo "grant-token" >"$T/grant"
# The answer comes 0.3 s after the request: runsc 20221219 failed a
# blocking read(2) or readv(2) of a host TCP socket with EAGAIN until then,
# under --network=host; on gVisor's own stack (the loader forwards to the
# relay) they wait, with no wrapper of the preloaded object's, and a
# non-blocking socket still answers EAGAIN at once.  One run, one request
# each: recv, cat's read, readv.
out=$(gv --egress-socket "$T/egress.sock" --grant-file "$T/grant" -- /bin/bash -c '
req="GET http://example.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n"
python3 -c "import socket
s = socket.create_connection((\"127.0.0.1\", 3128))
s.sendall(b\"$req\")
d = b\"\"
for b in iter(lambda: s.recv(4096), b\"\"):
    d += b
print(\"recv=\" + d.decode().splitlines()[-1])"
exec 3<>/dev/tcp/127.0.0.1/3128 && printf "$req" >&3 && echo "cat=$(cat <&3 2>&1 | tail -n1)"
exec 3<>/dev/tcp/127.0.0.1/3128 && printf "$req" >&3 && python3 -c "import os, socket
print(\"readv=%d\" % os.readv(3, [bytearray(16)]), end=\" \")
s = socket.create_connection((\"127.0.0.1\", 3128)); s.setblocking(False)
try: os.read(s.fileno(), 64); print(\"read\")
except BlockingIOError: print(\"EAGAIN\")" 2>&1 | tail -n1' 2>&1)
is "$(printf '%s' "$out" | sed -n 's/^recv=//p')" "relay-ok" "the relay on the run's loopback reaches the egress socket from inside gVisor"
is "$(printf '%s' "$out" | sed -n 's/^cat=//p')" "relay-ok" "a blocking read(2) of the relay's TCP socket waits for the answer (cat)"
is "$(printf '%s' "$out" | sed -n 's/^readv=//p')" "16 EAGAIN" "a blocking readv(2) waits too; a non-blocking read still answers EAGAIN"

# A served worker: the probe at start, runs, and a reset with evidence.
bg "$SB" serve --id gw --socket "$T/w.sock" 2>"$T/serve.log"
wait_sock "$T/w.sock" 30
call() { python3 "$TOP/tests/sandbox/client.py" "$T/w.sock" "$@"; }
# runw ARGV-JSON: a run on the served worker; its decoded stdout.
runw() { call run "{\"argv\": $1}" | python3 -c 'import json,sys,base64
r=json.load(sys.stdin); print(base64.b64decode(r.get("stdout_b64","")).decode(), end="") if r.get("ok") else print(r)'; }
out=$(runw '["/bin/sh","-c","nohup sleep 313 >/dev/null 2>&1 & echo left >/workspace/l; echo left >/tmp/l; echo left >/dev/shm/l; uname -r"]' 2>&1)
like "$out" "4.4.0" "a served worker runs the code under gVisor"
out=$(runw '["/bin/sh","-c","cat /workspace/l; echo pid=$$; for p in /proc/[0-9]*; do cat $p/cmdline; echo; done 2>/dev/null | grep -c ^sleep"]' 2>&1)
like "$out" "left" "the same tenant's next run sees its workspace"
is "$(printf '%s' "$out" | tail -n1)" "0" "and no process the last run left: the loader killed it inside gVisor"
# The lease keeps its sandbox: a later run's code is a later pid of the
# same gVisor kernel (a sandbox of its own would start it at 2 again).
p1=$(printf '%s' "$out" | sed -n 's/^pid=//p')
p2=$(runw '["/bin/sh","-c","echo $$"]' 2>&1)
t "the lease's runs share its sandbox (pid $p1, then $p2)" test "${p2:-0}" -gt "${p1:-0}"
# The loader's descriptors, which gVisor lets the code list through
# /proc/1/fd: /dev/null and the control socket, which cannot be opened.
out=$(runw '["/usr/bin/python3","-c","import os\nn=o=0\nfor f in os.listdir(\"/proc/1/fd\"):\n  if os.readlink(\"/proc/1/fd/\"+f)==\"/dev/null\": continue\n  n+=1\n  try: os.open(\"/proc/1/fd/\"+f, os.O_WRONLY); o+=1\n  except OSError: pass\nprint(n, o)"]' 2>&1)
is "$out" "1 0" "the loader holds /dev/null and its control socket only, which the code cannot open (no log to write)"
is "$(readelf -d "$TOP/libexec/kaizen/kz-gvisor-loader" | grep -c NEEDED)" "0" \
	"the loader is a static binary: no shared library or preload to map at each boot"
# A browser session's Chromium does not run in runsc yet: a gvisor worker
# refuses the op rather than run it without gVisor's layer.
out=$(call browser '{"grant": "g"}' 2>&1)
like "$out" '"error": *"unavailable".*runs code under gvisor, and a browser does not run there yet' \
	"a gvisor worker refuses a browser session (unavailable), never runs Chromium outside gVisor"
out=$(call run '{"argv": ["/bin/sh","-c","cd /"], "cwd": "nope"}' 2>&1)
like "$out" 'failed at cwd: the working directory does not exist' "a missing working directory is refused at its step (cwd)"
out=$(call run '{"argv": ["/no/such/tool"]}' 2>&1)
like "$out" '"exit_code": *127' "a missing command exits 127"
# A run the wall clock stops takes the sandbox with it (the run cgroup is
# killed); the next run boots another, and works.
out=$(call run '{"argv": ["/bin/sh","-c","sleep 30"], "timeout_ms": 1500}' 2>&1)
like "$out" '"limit": *"timeout"' "a run past its wall clock is stopped"
p3=$(runw '["/bin/sh","-c","echo $$"]' 2>&1)
t "the next run works, in a new sandbox (pid $p3)" test "${p3:-99}" -le 3
# A sandbox killed from outside while idle is noticed: the next run boots
# another instead of failing.
pkill -KILL -f "runsc.*$T/state/gw.runsc" 2>/dev/null
sleep 0.5
p4=$(runw '["/bin/sh","-c","echo $$"]' 2>&1)
t "after its sandbox was killed while idle, the next run works in a new one (pid $p4)" test "${p4:-99}" -le 3
out=$(call wipe 2>&1)
like "$out" '"ok": *true' "the reset is proven clean"
unlike "$out" ': *false' "every item of the evidence is positive"
# runsc_is up|gone N WORKER: whether (1) or not (0) a runsc of WORKER's is
# up (or none is left) within N tenths of a second.
runsc_is() {
	local want=$1 r
	for _ in $(seq "$2"); do
		pgrep -f "runsc.*$T/state/$3.runsc" >/dev/null && r=up || r=gone
		[ "$r" = "$want" ] && { echo 1; return; }
		sleep 0.1
	done
	echo 0
}
sandbox() { runsc_is up "$@"; }
gone() { runsc_is gone "$@"; }
is "$(sandbox 5 gw)" 0 "the reset leaves no sandbox up while its evidence is taken"
call health >/dev/null
is "$(sandbox 100 gw)" 1 "once the evidence is collected (health), the next lease's sandbox is booted ahead of its first run"
out=$(runw '["/bin/sh","-c","cat /workspace/l /tmp/l /dev/shm/l 2>/dev/null | grep -c left; for p in /proc/[0-9]*; do cat $p/cmdline; echo; done 2>/dev/null | grep -c ^sleep"]' 2>&1)
is "$(printf '%s' "$out" | tr '\n' ' ')" "0 0" "the next tenant finds no file and no process left"
t "the worker's runsc state directory exists while it serves" test -d "$T/state/gw.runsc"
call shutdown >/dev/null 2>&1
for i in $(seq 100); do [ -d "$T/state/gw.runsc" ] || break; sleep 0.05; done
tnot "and is removed at shutdown" test -d "$T/state/gw.runsc"

# What /proc/mounts does not show there (nosuid, nodev: t1121's TODO
# checks), tried as a tenant would: a set-user-ID root file and a device
# node in the projection give nothing.
mkdir "$T/proj" && cp /usr/bin/id "$T/proj/sid" && chmod 4755 "$T/proj/sid" &&
	mknod -m 666 "$T/proj/null" c 1 3
out=$(gv --projection "$T/proj" -- /bin/sh -c 'echo "sid=$(/projection/sid -u)"
	head -c1 /projection/null >/dev/null 2>&1 && echo dev=opened || echo dev=refused' 2>&1)
is "$(printf '%s' "$out" | grep '^sid=')" "sid=2100000000" "a set-user-ID root file in the projection runs as the sandbox uid"
is "$(printf '%s' "$out" | grep '^dev=')" "dev=refused" "a device node in the projection cannot be opened (nodev)"

# The host's projection as it is now, for every run of a lease (the
# sandbox kept for the lease does not serve a stale copy).
mkdir "$T/proj2" && echo v1 >"$T/proj2/f"
bg "$SB" serve --id gw3 --socket "$T/w3.sock" --projection "$T/proj2" \
	--gvisor-preboot off 2>"$T/serve3.log"
wait_sock "$T/w3.sock" 30
# (SANDBOX_GVISOR_PREBOOT off: no sandbox is kept between leases, the
# probe's neither.)
is "$(gone 50 gw3)" 1 "with preboot off, the probe's sandbox is not kept"
run3() { python3 "$TOP/tests/sandbox/client.py" "$T/w3.sock" run "{\"argv\": $1}" | python3 -c 'import json,sys,base64
r=json.load(sys.stdin); print(base64.b64decode(r.get("stdout_b64","")).decode(), end="") if r.get("ok") else print(r)'; }
a=$(run3 '["/bin/cat","/projection/f"]' 2>&1)
echo v2 >"$T/proj2/f"
b=$(run3 '["/bin/sh","-c","cat /projection/f; echo $$"]' 2>&1)
is "$a $(printf '%s' "$b" | head -n1)" "v1 v2" "a projection changed between two runs of a lease is seen as changed"
t "(both runs in the lease's one sandbox)" test "$(printf '%s' "$b" | tail -n1)" -gt 2
python3 "$TOP/tests/sandbox/client.py" "$T/w3.sock" wipe >/dev/null 2>&1
python3 "$TOP/tests/sandbox/client.py" "$T/w3.sock" health >/dev/null 2>&1
is "$(sandbox 20 gw3)" 0 "and none is booted after a reset"
python3 "$TOP/tests/sandbox/client.py" "$T/w3.sock" shutdown >/dev/null 2>&1

# runsc missing or failing: refusal naming the step; nothing runs.
rc_is 3 "a missing runsc refuses the run" gv --runsc "$T/nope" -- /bin/sh -c "touch $T/ran-missing"
like "$(cat "$T/.out")" "gvisor: runsc $T/nope" "naming the step (gvisor) and the path"
printf '#!/bin/sh\necho broken runsc >&2\nexit 1\n' >"$T/bad-runsc"; chmod +x "$T/bad-runsc"
rc_is 3 "a runsc that fails refuses the one-shot run" gv --runsc "$T/bad-runsc" -- /bin/true
SANDBOX_RUNSC=$T/bad-runsc "$SB" serve --id gw2 --socket "$T/w2.sock" >"$T/w2.out" 2>&1
rc=$?
is "$rc-$(grep -q 'gvisor: probe' "$T/w2.out" && echo named)" "3-named" "a served worker with a failing runsc refuses to start (exit 3), naming the probe"
like "$(cat "$T/w2.out")" "broken runsc" "and quoting what runsc said"
tnot "nothing ran" test -e "$T/ran-missing"
# Without kz-gvisor-loader or kz-gvisor-compat.so beside the binary
# (../libexec/kaizen/) a gvisor run refuses rather than run the code
# another way, or run programs that runsc breaks.
mkdir -p "$T/nocompat/bin" && cp "$SB" "$T/nocompat/bin/kz-sandbox"
"$T/nocompat/bin/kz-sandbox" run --timeout 30 -- /bin/sh -c "touch /workspace/x; echo ran" >"$T/noloader.out" 2>&1
is "$?-$(grep -c '^ran' "$T/noloader.out")" "3-0" "a gvisor run without kz-gvisor-loader beside the binary refuses (exit 3); nothing runs"
like "$(cat "$T/noloader.out")" "kz-gvisor-loader beside the binary" "naming the loader"
export SANDBOX_GVISOR_LOADER=$TOP/libexec/kaizen/kz-gvisor-loader
"$T/nocompat/bin/kz-sandbox" run --timeout 30 -- /bin/sh -c "touch /workspace/x; echo ran" >"$T/nocompat.out" 2>&1
is "$?-$(grep -c '^ran' "$T/nocompat.out")" "3-0" "a gvisor run without kz-gvisor-compat.so beside the binary refuses (exit 3); nothing runs"
like "$(cat "$T/nocompat.out")" "kz-gvisor-compat.so beside the binary" "naming the object"
out=$(SANDBOX_GVISOR_COMPAT=$TOP/libexec/kaizen/kz-gvisor-compat.so \
	"$T/nocompat/bin/kz-sandbox" run --timeout 30 -- /bin/ls -ld /workspace 2>&1)
like "$out" "^drwx.* sandbox sandbox " "SANDBOX_GVISOR_COMPAT and SANDBOX_GVISOR_LOADER name them elsewhere (ls -l works)"
unset SANDBOX_GVISOR_LOADER
# A descriptor handed to the code (kz-pi-validate's nonce and result
# pipes) reaches it at its number, passed into gVisor with the job; the
# code holds nothing else (no control socket, no log of the loader's).
out=$(gv --pass-fd 5 -- /usr/bin/python3 -c 'import os
os.write(5, b"through-gvisor\n")
print(sorted(int(x) for x in os.listdir("/proc/self/fd")))' 5>"$T/passed" 2>&1)
is "$(cat "$T/passed")" "through-gvisor" "a passed descriptor reaches the code at its number"
is "$out" "[0, 1, 2, 3, 5]" "the code holds its stdio and the passed descriptor only (3 is listdir's own)"
# One runsc cannot take (an INET socket) is refused at once, named, where
# runsc dropped the whole job and the run waited for its wall clock.
out=$(python3 - "$SB" "$T/ran-udp" <<'EOF'
import os, socket, subprocess, sys, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
os.dup2(u.fileno(), 5)
t = time.monotonic()
r = subprocess.run([sys.argv[1], "run", "--timeout", "20", "--pass-fd", "5", "--",
    "/bin/sh", "-c", "touch " + sys.argv[2]], pass_fds=(5,), capture_output=True, text=True)
print(r.returncode, "fast" if time.monotonic() - t < 10 else "slow", r.stderr.strip())
EOF
)
like "$out" '^3 fast .*at gvisor: descriptor 5 is of a kind gVisor cannot take' \
	"a passed INET socket is refused at once (exit 3), naming the descriptor"
tnot "and nothing ran" test -e "$T/ran-udp"
done_testing

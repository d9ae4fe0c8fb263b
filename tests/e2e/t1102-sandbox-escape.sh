#!/bin/bash
# The escape suite: each attempt runs as code inside kz-sandbox and must
# fail.  Syscall-level attempts are a static C helper (tests/sandbox/esc.c)
# mounted through the read-only projection; the rest are shell snippets that
# print ESCAPED when they get through.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
mkdir -p "$T/proj"
cc -static -O1 -o "$T/proj/esc" "$TOP/tests/sandbox/esc.c" 2>"$T/cc.log" ||
	{ echo "1..0 # SKIP cannot build the static helper"; exit 0; }
cp /bin/sh "$T/proj/capsh" && setcap cap_net_raw,cap_sys_admin+ep "$T/proj/capsh" 2>/dev/null
echo "host-secret-$$" >"$T/secret"
mkdir -p /var/lib/kz-e2e-$$ && echo "host-secret-$$" >/var/lib/kz-e2e-$$/s
on_exit "rm -rf /var/lib/kz-e2e-$$"

# A host loopback service the code must not reach.
python3 -c 'import socket,sys
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(5); print(s.getsockname()[1]); sys.stdout.flush()
while True: s.accept()[0].close()' >"$T/port" &
_pids="$_pids $!"
for i in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.05; done
HOSTPORT=$(cat "$T/port")

N=$("$T/proj/esc" list | wc -l)
SU=2100000000	# SANDBOX_UID and SANDBOX_GID's default
SH_TESTS=26
plan $((N + SH_TESTS))

sbx() { KZ_SECRET_TEST=worker-secret-$$ "$SB" run --projection "$T/proj" \
	--pids 64 --workspace-size 2M --tmp-size 2M --shm-size 2M --timeout 20 "$@"; }

for n in $("$T/proj/esc" list); do
	out=$(sbx --env HOSTPORT="$HOSTPORT" -- /projection/esc "$n" 2>&1)
	if [ "$n" = pids ]; then
		like "$out" "pids limit reached" "escape $n: fork past the pids limit is stopped"
	else
		like "$out" "^blocked $n" "escape $n is refused"
	fi
done

# esc_sh DESCRIPTION SNIPPET: the snippet prints ESCAPED if it got through.
esc_sh() {
	local out
	out=$(sbx -- /bin/sh -c "$2" 2>&1)
	if printf '%s' "$out" | grep -q ESCAPED || ! printf '%s' "$out" | grep -q DONE; then
		ok 1 "$1"; diag "$(printf '%s' "$out" | head -5)"
	else ok 0 "$1"; fi
}
esc_sh "host file outside the root view (test dir) is invisible" \
	"cat $T/secret && echo ESCAPED; echo DONE"
esc_sh "masked host directory (/var/lib) is empty" \
	"cat /var/lib/kz-e2e-$$/s && echo ESCAPED; echo DONE"
esc_sh "/root and /home are masked" \
	"[ -z \"\$(ls -A /root 2>/dev/null; ls -A /home 2>/dev/null)\" ] || echo ESCAPED; echo DONE"
esc_sh "the read-only root cannot be written" \
	"for f in /x /etc/x /usr/x /var/x /bin/x /dev/x /run/x /sys/x /projection/x /proc/x; do (: >\$f) 2>/dev/null && echo ESCAPED \$f; done; echo DONE"
esc_sh "writable places are only /workspace, /tmp, /dev/shm" \
	": >/workspace/a && : >/tmp/a && : >/dev/shm/a && echo DONE"
esc_sh "no host process is visible" \
	"[ \$(ls -d /proc/[0-9]* | wc -l) -le 4 ] || echo ESCAPED; kill -0 $$ 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "the run's init is hidden (hidepid)" \
	"cat /proc/1/environ 2>/dev/null && echo ESCAPED; ls /proc/1 >/dev/null 2>&1 && echo ESCAPED; echo DONE"
esc_sh "the worker's environment is not passed on" \
	"env | grep -q KZ_SECRET_TEST && echo ESCAPED; env | grep -q worker-secret && echo ESCAPED; echo DONE"
esc_sh "no capability in any set, no_new_privs set" \
	"grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status | grep -v '0000000000000000' && echo ESCAPED; grep -q 'NoNewPrivs:.1' /proc/self/status || echo ESCAPED; echo DONE"
esc_sh "setuid-root binaries do not give root" \
	"su root -c 'echo ESCAPED' </dev/null 2>/dev/null; [ \$(id -u) = 0 ] && echo ESCAPED; echo DONE"
esc_sh "file capabilities do not apply (nosuid, no_new_privs)" \
	"/projection/capsh -c 'grep CapEff /proc/self/status' | grep -v 0000000000000000 && echo ESCAPED; echo DONE"
esc_sh "uid and gid are the sandbox's own, not root or nobody" \
	"[ \$(id -u) = $SU ] && [ \$(id -g) = $SU ] && [ -z \"\$(id -G | tr ' ' '\n' | grep -v $SU)\" ] && echo DONE"
esc_sh "DNS resolution fails (no network)" \
	"getent hosts example.com && echo ESCAPED; echo DONE"
esc_sh "only loopback exists in the network namespace" \
	"[ \$(ls /sys/class/net 2>/dev/null | wc -l) -le 1 ] || echo ESCAPED; grep -v -E '^ *(Inter|face|lo:)' /proc/net/dev | grep . && echo ESCAPED; echo DONE"
esc_sh "host loopback service unreachable" \
	"(exec 3<>/dev/tcp/127.0.0.1/$HOSTPORT) 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "writing past the workspace bound fails" \
	"dd if=/dev/zero of=/workspace/big bs=1M count=8 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "writing past the /tmp bound fails" \
	"dd if=/dev/zero of=/tmp/big bs=1M count=8 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "mknod is refused" \
	"mknod /tmp/sda b 8 0 2>/dev/null && echo ESCAPED; mkfifo /tmp/ok && echo DONE"
esc_sh "no host devices (/dev/vsock, disks, kmsg) in /dev" \
	"ls /dev/vsock /dev/vda /dev/sda /dev/kmsg /dev/mem 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "sysrq and kernel tunables cannot be written" \
	"echo b >/proc/sysrq-trigger 2>/dev/null && echo ESCAPED; echo 1 >/proc/sys/kernel/sysrq 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "no host cgroup hierarchy to escape through" \
	"ls /sys/fs/cgroup 2>/dev/null | grep . && echo ESCAPED; echo DONE"
esc_sh "hostname changes are refused" \
	"hostname evil 2>/dev/null && echo ESCAPED; echo DONE"
esc_sh "host sockets under /run are masked" \
	"find /run /var/run -type s 2>/dev/null | grep . && echo ESCAPED; echo DONE"
esc_sh "setuid bit is ignored on the projection (nosuid)" \
	"grep ' /projection ' /proc/mounts | grep -q nosuid || echo ESCAPED; echo DONE"
esc_sh "the workspace is noexec-free but nodev and nosuid" \
	"grep ' /workspace ' /proc/mounts | grep -q 'nosuid,nodev' || echo ESCAPED; echo DONE"
esc_sh "the grant and relay are absent without an egress socket" \
	"env | grep -i proxy && echo ESCAPED; (exec 3<>/dev/tcp/127.0.0.1/3128) 2>/dev/null && echo ESCAPED; echo DONE"
done_testing

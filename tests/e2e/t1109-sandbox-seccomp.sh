#!/bin/bash
# The seccomp allowlist: kz-sandbox seccomp prints it; from inside the
# sandbox every native system call number from 0 to 1023 that it does not
# allow is refused (ENOSYS, or EPERM for the calls withheld on purpose),
# the calls newer than libseccomp's table included; the argument rules hold
# from both sides; IPC, events and timers still work; and Python, Node, a C
# compiler, git and tar still do their job.  The walk is a static C helper
# (tests/sandbox/scwalk.c) run from the read-only projection.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
mkdir -p "$T/proj"
cc -static -O1 -o "$T/proj/scwalk" "$TOP/tests/sandbox/scwalk.c" 2>"$T/cc.log" ||
	{ echo "1..0 # SKIP cannot build the static helper"; exit 0; }
# Calls the issue named: newer than libseccomp 2.5.4, so unnameable.
NEW="457:statmount 458:listmount 459:lsm_get_self_attr 463:setxattrat 467:open_tree_attr"
WITHHELD="ptrace process_vm_readv mount umount2 open_tree move_mount fsopen
	unshare setns keyctl bpf perf_event_open userfaultfd fanotify_init
	kexec_load init_module finit_module open_by_handle_at iopl ioperm
	modify_ldt swapon reboot acct clock_settime settimeofday syslog
	sethostname vhangup io_uring_setup quotactl personality"
plan $((6 + 2 * 5 + $(echo $WITHHELD | wc -w) + 3 + 4 + 5))

sbx() { "$SB" run --projection "$T/proj" --timeout 60 "$@"; }

list=$("$SB" seccomp 2>&1); rc=$?
is "$rc" 0 "kz-sandbox seccomp prints the policy"
t "--help names the seccomp subcommand" sh -c "$SB --help | grep -q 'kz-sandbox seccomp'"
like "$list" "^# [0-9]+ BPF instructions" "the listing says how large the filter is"
ALLOWED=$(printf '%s\n' "$list" | awk '$1 == "allow" || $1 == "args" { printf "%s%s", s, $2; s = "," }')
EPERM=$(printf '%s\n' "$list" | awk '$1 == "refuse" && $4 == "EPERM" { printf "%s%s", s, $2; s = "," }')
# Without a listing the walker refuses to walk: "none" is not a list.
ALLOWED=${ALLOWED:-none} EPERM=${EPERM:-none}
like "$(printf '%s\n' "$list" | grep -c '^allow ')" "^[1-9][0-9][0-9]$" "a few hundred calls are allowed"
like "$list" "^allow +0 read +io" "read is allowed, in its group"
like "$list" "^args +56 clone .*namespace" "clone is allowed by its argument rule"
for n in $NEW; do
	nr=${n%%:*} name=${n#*:}
	unlike ",$ALLOWED," ",$nr," "$name ($nr) is not on the allowed list"
done
for n in $WITHHELD; do
	like "$list" "^refuse +[0-9]+ $n +EPERM" "$n is withheld with EPERM"
done

# The host kernel has the new calls (they fail on arguments there, not
# with ENOSYS), so ENOSYS inside is the filter's doing.
probe=$("$T/proj/scwalk" probe)
out=$(sbx -- /projection/scwalk walk "$ALLOWED" "$EPERM" 2>&1)
like "$out" "walked 1024 numbers: [0-9]+ allowed \(not called\), [0-9]+ refused, 0 not refused" \
	"every number not on the list is refused"
[ -z "$(printf '%s\n' "$out" | grep '^bad')" ] || diag "$(printf '%s\n' "$out" | grep '^bad' | head -20)"
like "$out" "^exempt 335 uretprobe: (killed by signal 4|returned ENOSYS)" \
	"uretprobe, which the kernel lets past every filter, only kills its caller"
like "$out" "^exempt 336 uprobe: returned (ENXIO|ENOSYS)" \
	"uprobe, which the kernel lets past every filter, does nothing outside a trampoline"
for n in $NEW; do
	nr=${n%%:*} name=${n#*:}
	if printf '%s\n' "$probe" | grep -q "^$name $nr ENOSYS$"; then
		ok 0 "$name is refused # SKIP the host kernel has no $name"
	else
		like "$out" "^refused $nr $name ENOSYS" "$name ($nr), which the host kernel has, is refused with ENOSYS"
	fi
done

# The argument rules, and the IPC, event and timer calls tenants use.
out=$(sbx -- /projection/scwalk args 2>&1); rc=$?
is "$rc" 0 "clone, clone3, ioctl, socket and socketpair rules hold from both sides"
[ "$rc" = 0 ] || diag "$(printf '%s\n' "$out" | grep -v '^ok' | head -20)"
like "$(printf '%s\n' "$out" | grep -c '^ok ')" "^3[0-9]$" "every argument check ran"
out=$(sbx -- /projection/scwalk ipc 2>&1); rc=$?
is "$rc" 0 "SysV and POSIX IPC, inotify, eventfd, epoll, timers and signalfd work"
[ "$rc" = 0 ] || diag "$(printf '%s\n' "$out" | grep -v '^ok' | head -20)"
like "$(printf '%s\n' "$out" | grep -c '^ok ')" "^1[0-9]$" "every IPC and event check ran"

# Real tools, each with more than a hello world.
cat >"$T/proj/t.py" <<'EOF'
import asyncio, hashlib, multiprocessing, os, socket, sqlite3, subprocess
import tempfile, threading
def sq(x):
    return x * x
async def tick():
    await asyncio.sleep(0.01)
    return 1
if __name__ == "__main__":
    subprocess.run(["/bin/true"], check=True)
    th = threading.Thread(target=lambda: None); th.start(); th.join()
    a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    c = socket.create_connection(s.getsockname()); s.accept()[0].close()
    db = sqlite3.connect(os.path.join(tempfile.mkdtemp(), "db"))
    db.execute("create table t(x)"); db.execute("insert into t values(1)")
    db.commit()
    with multiprocessing.Pool(2) as p:
        assert p.map(sq, range(4)) == [0, 1, 4, 9]
    assert asyncio.run(tick()) == 1
    hashlib.sha256(b"x").hexdigest()
    print("python ok")
EOF
cat >"$T/proj/t.js" <<'EOF'
const cp = require('child_process'), fs = require('fs'), net = require('net');
const crypto = require('crypto'), zlib = require('zlib');
const { Worker } = require('worker_threads');
cp.execFileSync('/bin/true');
fs.writeFileSync('/tmp/n', zlib.gzipSync(crypto.randomBytes(64)));
const w = new Worker('require("worker_threads").parentPort.postMessage(6*7)',
    { eval: true });
w.on('message', (v) => {
  if (v !== 42) process.exit(1);
  const srv = net.createServer((c) => c.end('hi')).listen(0, '127.0.0.1', () => {
    net.connect(srv.address().port, '127.0.0.1').on('data', () => {
      srv.close();
      fs.promises.readFile('/tmp/n').then(() => console.log('node ok'));
    });
  });
});
EOF
cat >"$T/proj/t.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
static void *f(void *a) { return a; }
int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); pthread_join(t, 0);
	puts("cc ok"); return 0; }
EOF
tool() { # tool DESCRIPTION BINARY WANT SCRIPT
	if [ ! -x "$2" ]; then ok 0 "$1 # SKIP no $2"; return; fi
	local out; out=$(sbx -- /bin/sh -c "$4" 2>&1)
	like "$out" "$3" "$1"
}
tool "Python runs subprocesses, threads, sockets, sqlite, multiprocessing, asyncio" \
	/usr/bin/python3 "^python ok$" "/usr/bin/python3 /projection/t.py"
tool "Node runs child processes, workers, zlib, crypto and a TCP server" \
	/usr/bin/node "^node ok$" "/usr/bin/node /projection/t.js"
tool "the C compiler builds a threaded program in /tmp and it runs" \
	/usr/bin/cc "^cc ok$" "cc -O2 -pthread -o /tmp/t /projection/t.c && /tmp/t"
tool "git inits, adds and commits in /workspace" /usr/bin/git "^1 clean$" \
	"cd /workspace && git init -q r && cd r && echo x >f && git add f &&
	 git -c user.name=t -c user.email=t@example.com commit -qm m &&
	 echo \"\$(git log --oneline | wc -l) \$(git status --porcelain | wc -l | sed s/^0\$/clean/)\""
tool "tar creates and extracts a gzip archive" /bin/tar "^tar ok$" \
	"mkdir -p /workspace/d/e && echo y >/workspace/d/e/y &&
	 tar -czf /tmp/a.tgz -C /workspace d && mkdir /tmp/x &&
	 tar -xzf /tmp/a.tgz -C /tmp/x && cmp /workspace/d/e/y /tmp/x/d/e/y &&
	 echo tar ok"
done_testing

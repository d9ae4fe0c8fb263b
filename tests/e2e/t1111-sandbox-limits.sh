#!/bin/bash
# The limits a tenant cannot step out of: socket buffers on its own
# loopback count against its memory limit, reads from the root's disk are
# throttled, the per-uid counts of queued signals and message queue bytes
# are bounded, the code never runs as the host's nobody, and a served
# worker takes at most SANDBOX_LEASES_MAX leases before its reset refuses
# to call it clean.  Two kernel-wide counts are not the tenant's to take:
# a lease holds at most 64 pseudo-terminals, and Linux native AIO (whose
# event count is the host's) is not there at all.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
plan 14
mkdir -p "$T/proj" && cp "$TOP/tests/sandbox/tenant.py" "$T/proj/"

# 100 loopback connections, each written to until it blocks: without a
# bound on socket memory that queues ~370 MiB here; the run's 64 MiB
# limit must hold it near 64.
out=$("$SB" run --memory 64M --projection "$T/proj" --timeout 60 -- \
	/usr/bin/python3 /projection/tenant.py tcpfill 100 2>&1)
q=$(printf '%s\n' "$out" | awk '$1 == "queued_mib" {print $2}')
t "loopback TCP buffers stay within the 64 MiB memory limit (${q:-?} MiB queued)" \
	test "${q:-999}" -le 96

# Reads from the disk under the root view: 6 MiB at 2 MiB/s take seconds.
# The file sits in /usr, which the root view shows, on the root's disk.
D=/usr/local/lib/kz-e2e-io-$$
mkdir -p "$D" && on_exit "rm -rf '$D'"
dd if=/dev/urandom of="$D/f" bs=1M count=6 2>/dev/null && sync
rd() { echo 1 >/proc/sys/vm/drop_caches; "$SB" run --io-read-bps "$1" -- \
	dd if="$D/f" of=/dev/null bs=1M 2>&1 | awk '/copied/ {print $(NF-3)}'; }
if [ -d /sys/fs/cgroup/blkio ] || grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	s=$(rd 2M)
	t "reads from the root's disk are throttled to 2 MiB/s (${s:-?} s for 6 MiB)" \
		python3 -c "import sys; sys.exit(0 if float('${s:-0}') >= 2.0 else 1)"
	s=$(rd 0)
	t "and run at disk speed without a limit (${s:-?} s)" \
		python3 -c "import sys; sys.exit(0 if float('${s:-9}') < 2.0 else 1)"
else
	ok 0 "# SKIP no blkio or io controller"; ok 0 "# SKIP"
fi

lim=$("$SB" run -- /bin/cat /proc/self/limits 2>&1)
like "$lim" 'Max pending signals +256 +256' "RLIMIT_SIGPENDING is SANDBOX_SIGPENDING, hard and soft"
like "$lim" 'Max msgqueue size +819200 +819200' "RLIMIT_MSGQUEUE is SANDBOX_MSGQUEUE"
rc_is 2 "the host's nobody is refused as the code's uid" "$SB" run --uid 65534 --gid 4242 -- /bin/true
like "$(cat "$T/.out")" "never runs as the host's nobody" "with a reason naming it"
rc_is 2 "and nogroup as its gid" "$SB" run --uid 4242 --gid 65534 -- /bin/true

# Every devpts instance but the host's draws on one count (kernel.pty.max
# less kernel.pty.reserve, 3072 by default): one lease may hold 64.
pty=$("$SB" run -- /usr/bin/python3 -c '
import os
n = 0
try:
    for i in range(200):
        os.openpty(); n += 1
except OSError as e:
    print(n, e.errno)' 2>&1)
is "$pty" "64 28" "a lease holds at most 64 pseudo-terminals (the 65th: ENOSPC)"
# fs.aio-max-nr is one count for the host: io_setup is not on the list.
aio=$("$SB" run -- /usr/bin/python3 -c '
import ctypes
l = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
print(l.syscall(206, 30000, ctypes.byref(ctx)), ctypes.get_errno())' 2>&1)
is "$aio" "-1 38" "native AIO is refused with ENOSYS (io_setup of 30000 events)"
t "and the host's AIO count is untouched" test "$(cat /proc/sys/fs/aio-nr)" -lt 30000

# SANDBOX_LEASES_MAX=2: the start and one reset give the two leases; the
# next reset does not call the worker clean.
ID=e2e-limits-$$
bg "$SB" serve --id "$ID" --socket "$T/w.sock" --leases-max 2
wait_sock "$T/w.sock" 10
like "$($C "$T/w.sock" wipe)" '"ok": true.*"within_lease_limit": true' "the first reset (second lease) is clean"
w=$($C "$T/w.sock" wipe)
like "$w" '"ok": false' "the reset for a third lease is refused"
like "$w" '"within_lease_limit": false' "naming the lease limit"
$C "$T/w.sock" shutdown >/dev/null
done_testing

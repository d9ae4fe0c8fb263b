#!/bin/bash
# The cgroup v2 path, forced (SANDBOX_CGROUP_VERSION=v2) against a cgroup2
# mount this test makes in a private mount namespace.  Where that hierarchy
# offers memory, pids and cpu, a worker runs on it with the documented
# layout and limits.  Where it does not -- this CI host: memory, pids and
# cpu are bound to v1 hierarchies that hold cgroups, and a controller
# belongs to one hierarchy at a time, so any cgroup2 mount offers only the
# others -- the worker must refuse to start, name the missing controllers
# and leave nothing behind.  v1 can be forced too, and a v1 join that fails
# half-way leaves no cgroup behind.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
mkdir -p "$T/cg2"
ID=e2e-v2-$$
PARENT=kz-e2e-v2-$$

# in_ns CMD: CMD in a private mount namespace with cgroup2 at $T/cg2.
in_ns() {
	unshare -m --propagation private sh -c 'mount -t cgroup2 none "$0" && exec "$@"' \
		"$T/cg2" env SANDBOX_CGROUP_ROOT="$T/cg2" SANDBOX_CGROUP_VERSION=v2 \
		SANDBOX_CGROUP_PARENT="$PARENT" "$@"
}
ctrl=$(unshare -m --propagation private sh -c 'mount -t cgroup2 none "$0" && cat "$0/cgroup.controllers"' "$T/cg2")
full=1
for c in memory pids cpu; do case " $ctrl " in *" $c "*) ;; *) full=0;; esac; done
on_exit "for d in run init agent ''; do rmdir /sys/fs/cgroup/unified/$PARENT/$ID/\$d 2>/dev/null; done; rmdir /sys/fs/cgroup/unified/$PARENT 2>/dev/null"

# rt_v1: a real-time agent is refused by a v1 cpu hierarchy without
# real-time runtime, after it has joined memory and pids.
rt_v1() {
	if [ ! -e /sys/fs/cgroup/cpu/cpu.rt_runtime_us ]; then
		ok 0 "# SKIP no real-time group scheduling"; ok 0 "# SKIP"; return
	fi
	local out rc=0 id=e2e-rt-$$
	out=$(SANDBOX_CGROUP_VERSION=v1 chrt -f 10 "$SB" serve --id "$id" --socket "$T/rt.sock" 2>&1) || rc=$?
	is "$rc" 3 "an agent the cpu hierarchy refuses half-way fails closed"
	tnot "and leaves no cgroup of its own behind" sh -c "ls -d /sys/fs/cgroup/*/kz-sandbox/$id 2>/dev/null | grep ."
}

if [ "$full" = 0 ]; then
	plan 8
	rt_v1
	diag "cgroup2 here offers only: ${ctrl:-nothing}; the v2 path must fail closed"
	out=$(in_ns "$SB" run --id "$ID" -- /bin/sh -c 'echo RAN' 2>&1); rc=$?
	is "$rc" 3 "forced v2 without its controllers: the run is refused (exit 3)"
	like "$out" "^kz-sandbox: isolation setup failed: cgroup: v2 is configured but its root does not offer( memory)?( pids)?( cpu)?\$" "in one line naming the missing controllers"
	unlike "$out" "RAN" "and nothing ran"
	tnot "no cgroup was created in the v2 hierarchy" test -e "/sys/fs/cgroup/unified/$PARENT/$ID"
	out=$(in_ns "$SB" serve --id "$ID" --socket "$T/w.sock" 2>&1); rc=$?
	is "$rc" 3 "a serve worker refuses to start the same way"
	out=$(SANDBOX_CGROUP_VERSION=v1 "$SB" run --id "$ID" -- /bin/sh -c 'echo RAN' 2>&1)
	is "$out" "RAN" "v1 forced runs on the v1 hierarchies"
	done_testing
	exit
fi

plan 10
rt_v1
bg in_ns "$SB" serve --id "$ID" --socket "$T/w.sock" --pids 32 --memory 64M
wait_sock "$T/w.sock" 10
CG=/sys/fs/cgroup/unified/$PARENT/$ID
like "$($C "$T/w.sock" health)" '"ok": true' "a worker starts on cgroup v2"
is "$(cat "$CG/run/pids.max")" 32 "the run cgroup carries the pids limit"
is "$(cat "$CG/run/memory.max")" $((64 << 20)) "and the memory limit"
is "$(wc -l <"$CG/init/cgroup.procs")" 1 "the run init sits in <id>/init"
is "$(wc -l <"$CG/agent/cgroup.procs")" 1 "the agent sits in the leaf <id>/agent"
like "$($C "$T/w.sock" run '{"argv":["/bin/cat","/proc/self/cgroup"]}')" '"exit_code": 0' "code runs"
like "$($C "$T/w.sock" run '{"argv":["/bin/sh","-c","i=0; while [ $i -lt 64 ]; do sleep 5 & i=$((i+1)); done; wait"],"timeout_ms":5000}')" '"limit": "pids"' "the pids limit is reported"
$C "$T/w.sock" shutdown >/dev/null
for i in $(seq 40); do [ -d "$CG" ] || break; sleep 0.05; done
tnot "shutdown removes the worker cgroup" test -d "$CG"
done_testing

#!/bin/bash
# kz-sandbox with SANDBOX_USERNS=on: the code runs in a user namespace that
# maps only the sandbox uid/gid to unprivileged host ids (setgroups denied);
# every capability inside that namespace reaches nothing on the host; the
# worker ops still hold; a kernel that refuses user namespaces fails closed.
# (The escape suite itself runs in this mode in t1107.)
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
cc -O1 -o "$T/probe" "$TOP/tests/sandbox/userns-probe.c" &&
	cc -O1 -o "$T/nouserns" "$TOP/tests/sandbox/nouserns.c" -lseccomp ||
	{ echo "1..0 # SKIP cannot build the helpers"; exit 0; }
# A chroot whose root is not its mount namespace's root cannot create a user
# namespace at all (EPERM): there is nothing to test there.
unshare --user true 2>/dev/null ||
	{ echo "1..0 # SKIP this environment refuses user namespaces (chroot?)"; exit 0; }
HU=$((200000 + $$ % 50000))
plan 26

# Inside, the code is uid and gid 65534 (the overflow ids, which map to
# $HU on the host).
sbx() { "$SB" run --userns on --userns-host-uid "$HU" --userns-host-gid "$HU" \
	--uid 65534 --gid 65534 --timeout 20 "$@"; }
out=$(sbx -- /bin/sh -c 'cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups; id -u; id -g; id -G' 2>&1)
like "$out" "^ *65534 +$HU +1\$" "uid_map maps only the sandbox uid, to the host id"
like "$(printf '%s' "$out" | sed -n 2p)" "^ *65534 +$HU +1\$" "gid_map maps only the sandbox gid"
like "$(printf '%s' "$out" | sed -n 3p)" "^deny\$" "setgroups is denied"
is "$(printf '%s' "$out" | sed -n 4,6p | tr '\n' ' ')" "65534 65534 65534" "the code is uid/gid 65534 inside, no other group"
out=$(sbx -- /bin/sh -c 'readlink /proc/self/ns/user' 2>&1)
unlike "$out" "^$(readlink /proc/self/ns/user)\$" "the code is not in the host's user namespace"
out=$(sbx -- /bin/sh -c 'grep -E "^Cap(Inh|Prm|Eff|Bnd|Amb):" /proc/self/status | grep -vc 0000000000000000; grep NoNewPrivs /proc/self/status' 2>&1)
like "$out" "^0" "no capability in any set inside the namespace either"
like "$out" "NoNewPrivs:.1" "no_new_privs is set"
out=$(sbx -- /bin/sh -c 'echo x >/workspace/f && echo x >/tmp/f && echo x >/dev/shm/f && stat -c %u /workspace/f && : >/etc/x' 2>&1)
like "$out" "^65534" "the writable places work and belong to the sandbox uid"
like "$out" "Read-only file system|Permission denied" "the root view stays read-only"
# The code's processes run as the mapped host id on the host.
sbx -- /bin/sh -c 'sleep 3' >/dev/null 2>&1 & sp=$!
for i in $(seq 60); do pgrep -x -u "$HU" sleep >/dev/null && break; sleep 0.05; done
t "on the host the code runs as the unprivileged host uid $HU" pgrep -x -u "$HU" sleep
wait $sp

# A process holding every capability inside the code's namespace (the probe
# enters it from the host) still gets nothing on the host.
echo "host-only-$$" >"$T/secret" && chmod 0600 "$T/secret"
mkdir -p "$T/rootdir" && chmod 0755 "$T/rootdir"
sleep 30 & victim=$!; _pids="$_pids $victim"
ID=e2e-userns-$$
S=$T/w.sock
bg "$SB" serve --id "$ID" --socket "$S" --userns on --userns-host-uid "$HU" --userns-host-gid "$HU" \
	--uid 65534 --gid 65534
wait_sock "$S" 10
like "$($C "$S" health)" '"userns": true' "health reports the user namespace"
$C "$S" run '{"argv":["/bin/sh","-c","sleep 4"],"timeout_ms":8000}' >/dev/null 2>&1 & rp=$!
CG=/sys/fs/cgroup/pids/kz-sandbox/$ID/run/cgroup.procs
code=
for i in $(seq 80); do code=$(head -1 "$CG" 2>/dev/null); [ -n "$code" ] && break; sleep 0.05; done
pr=$("$T/probe" "$code" "$T/secret" "$T/rootdir" "$victim" 2>&1); prc=$?
like "$pr" "^caps 000001ffffffffff|^caps 0000003fffffffff|^caps [0-9a-f]*f{8} uid 65534" "the probe holds every capability inside, as the sandbox uid"
like "$pr" "blocked read a host-only file" "those capabilities do not read a host-only file"
like "$pr" "blocked create a file in a root directory" "nor write into a root-owned host directory"
like "$pr" "blocked chown a host file" "nor chown a host file"
like "$pr" "blocked mount on the host" "nor mount on the host"
like "$pr" "blocked bind mount on the host" "nor bind mount on the host"
like "$pr" "blocked signal a host root process" "nor signal a host root process"
like "$pr" "blocked set the host name" "nor set the host name"
like "$pr" "blocked raw socket on the host network" "nor open a raw socket on the host network"
like "$pr" "blocked reboot the host" "nor reboot the host"
is "$prc" 0 "no probe attempt got through"
wait $rp
w=$($C "$S" wipe)
like "$w" '"ok": true, "evidence": \{("[a-z_]+": true(, )?)+\}' "wipe still proves a clean worker, every item"
$C "$S" shutdown >/dev/null

# A kernel that refuses user namespaces: nothing runs, one line says why.
err=$("$T/nouserns" "$SB" run --userns on -- /bin/sh -c 'echo RAN' 2>&1); rc=$?
is "$rc" 3 "a refused user namespace fails closed (exit 3)"
like "$err" "^kz-sandbox: isolation setup failed: namespaces: the kernel refuses a user namespace: .+" "with a reason that names the step"
is "$(printf '%s\n' "$err" | wc -l)" 1 "in one line, and nothing ran"
done_testing

#!/bin/bash
# The root view is an allowlist: the system directories, a synthesized
# /etc, and only what the operator adds.  A host file outside it (under a
# fresh top-level directory, under /home, /root, /var, /srv, /opt) is not
# there; /etc names only the sandbox; the host's kernel command line is
# not readable; mountinfo names no host path; a mask or an extra directory
# that cannot be applied exactly, or that would show the run directory,
# refuses to start, naming the path.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
plan 26
TOPD=/kz-e2e-top-$$
mkdir -p "$TOPD" /home/kz-e2e-$$ /opt/kz-e2e-$$ && chmod 0755 "$TOPD" /home/kz-e2e-$$ /opt/kz-e2e-$$
on_exit "rm -rf '$TOPD' /home/kz-e2e-$$ /opt/kz-e2e-$$"
echo "top-secret-$$" >"$TOPD/s" && echo "home-secret-$$" >/home/kz-e2e-$$/s &&
	echo "opt-$$" >/opt/kz-e2e-$$/s && chmod 0644 "$TOPD/s" /home/kz-e2e-$$/s /opt/kz-e2e-$$/s
mkdir -p "$T/run" "$T/proj" && echo projected >"$T/proj/p.txt"
export KZ_RUN_DIR=$T/run
sbx() { "$SB" run --timeout 20 "$@"; }
in_sbx() { sbx -- /bin/sh -c "$1" 2>&1; }

is "$(in_sbx "cat $TOPD/s 2>&1 >/dev/null | grep -c 'No such file'")" 1 \
	"a file under a fresh top-level host directory is not visible"
is "$(in_sbx "cat /home/kz-e2e-$$/s 2>/dev/null; ls -A / | tr '\n' ' '")" \
	"bin dev etc lib lib32 lib64 proc run sbin sys tmp usr workspace " \
	"nor one under /home: the view's top level is the allowlist"
like "$(in_sbx 'ls -A /etc | tr "\n" " "')" '^alternatives group hostname hosts ld.so.cache (mime.types )?nsswitch.conf os-release passwd protocols services ssl $' \
	"/etc holds only the synthesized files and the few host files tools read"
is "$(in_sbx 'cat /etc/passwd')" "sandbox:x:2100000000:2100000000:sandbox:/workspace:/bin/sh" \
	"/etc/passwd names only the sandbox's ids"
is "$(in_sbx 'cat /etc/group')" "sandbox:x:2100000000:" "/etc/group too"
is "$(in_sbx 'cat /etc/hostname; uname -n')" "sandbox
sandbox" "the host name is the neutral one, in /etc and the UTS namespace"
unlike "$(in_sbx 'cat /etc/hosts')" "$(hostname)" "/etc/hosts does not name the host"
is "$(in_sbx 'wc -c </proc/cmdline')" 0 "the host's kernel command line reads empty"
unlike "$(in_sbx 'ls /etc/machine-id /etc/resolv.conf /etc/shadow /etc/kaizen 2>&1')" '^/etc/' \
	"no machine-id, resolv.conf, shadow or kaizen config"
like "$(in_sbx '/usr/bin/python3 -c "import ssl, json, email; ssl.create_default_context(); print(\"py ok\")"; grep -c BEGIN /etc/ssl/certs/ca-certificates.crt; getent passwd sandbox; id -un' | tr '\n' ' ')" \
	"^py ok [1-9][0-9]* sandbox:x:2100000000:[^ ]* sandbox $" "interpreters, CA certificates and the account database work"

# mountinfo: nothing of the run directory, the projection's host path, the
# state directory or the worker id.
mi=$(sbx --projection "$T/proj" -- /bin/cat /proc/self/mountinfo 2>&1)
like "$mi" ' /projection ' "the projection is mounted"
unlike "$mi" "$T" "mountinfo does not name the test's directories (run dir, projection source)"
unlike "$mi" "/run/kz-sandbox|run-[0-9]+" "nor the state directory or the worker id"
is "$(sbx --projection "$T/proj" -- /bin/cat /projection/p.txt 2>&1)" projected "and the projection still reads"
ID=e2e-rv-$$ C="python3 $TOP/tests/sandbox/client.py"
bg "$SB" serve --id "$ID" --socket "$T/w.sock" --projection "$T/proj" --state-dir "$T/state"
wait_sock "$T/w.sock" 10
r=$($C "$T/w.sock" run '{"argv":["/bin/cat","/proc/self/mountinfo"]}')
mi=$(printf '%s' "$r" | python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["stdout_b64"]).decode())')
unlike "$mi" "$ID|$T" "a served worker's mountinfo names neither its id nor its directories"
$C "$T/w.sock" shutdown >/dev/null

# What the operator adds is shown read-only, exactly as configured.
is "$(sbx --extra-ro /opt/kz-e2e-$$ -- /bin/sh -c "cat /opt/kz-e2e-$$/s; : >/opt/kz-e2e-$$/x" 2>&1)" \
	"opt-$$
/bin/sh: 1: cannot create /opt/kz-e2e-$$/x: Read-only file system" "an extra directory is shown, read-only"
rc_is 3 "a mask naming a regular file refuses to start" sbx --mask /etc/passwd -- /bin/true
like "$(cat "$T/.out")" "mask /etc/passwd: not a directory" "naming the path"
ln -s /usr/share "$TOPD/link"
rc_is 3 "an extra directory that crosses a symlink refuses to start" sbx --extra-ro "$TOPD/link/doc" -- /bin/true
like "$(cat "$T/.out")" "crosses a symlink" "saying so"
rc_is 3 "a mask crossing a symlink refuses to start" sbx --mask /lib/x86_64-linux-gnu -- /bin/true
like "$(cat "$T/.out")" "mask /lib/x86_64-linux-gnu: crosses a symlink" "naming the path"
mkdir -p /srv/kz-e2e-$$/run && on_exit "rm -rf /srv/kz-e2e-$$"
rc_is 3 "an extra directory holding the run directory refuses to start" \
	env KZ_RUN_DIR=/srv/kz-e2e-$$/run "$SB" run --extra-ro /srv/kz-e2e-$$ -- /bin/true
like "$(cat "$T/.out")" "holds the run directory" "saying so"
rc_is 3 "an extra directory that does not exist refuses to start" sbx --extra-ro /opt/kz-e2e-$$/none -- /bin/true
rc_is 2 "an extra directory over the sandbox's own /etc is a config error" sbx --extra-ro /etc/ssl -- /bin/true
done_testing

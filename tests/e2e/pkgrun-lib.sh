# Sourced by the kz-pkgrun e2e tests after lib.sh: a field key and a real
# kz-audit in $T, the runner's cache, state and workspaces in $T (alice's
# own in conversation c1 is ws/c1/alice), and the demo package admitted
# (its hash in H).  pr ARGS: kz-pkgrun invoke with alice's actor and
# conversation; n_pkg: the package records so far.
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
export KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/field.key
export KZ_AUDIT_SOCKET=$T/kz-audit.sock
export PKGRUN_CACHE=$T/pkgcache PKGRUN_STATE_DIR=$T/pkgstate PKGRUN_WORKSPACE_ROOT=$T/ws
on_exit "rmdir /sys/fs/cgroup/kz-pkgrun 2>/dev/null"
start_audit() {
	bg kz-audit serve --socket "$KZ_AUDIT_SOCKET" 2>>"$T/audit.log"
	AUDIT_PID=$LASTPID
	wait_sock "$KZ_AUDIT_SOCKET"
}
start_audit
mkdir -p "$T/ws/c1/alice/src"
printf 'one\ntwo\nthree\n' >"$T/ws/c1/alice/src/notes.txt"
H=$(kz-pkgrun admit "$TOP/tests/pkgrun/demo" "$TOP/tests/pkgrun/demo.json" 2>"$T/admit.err")
pr() { kz-pkgrun invoke --package "$H" --actor alice --conversation c1 "$@"; }
audit_q() { kz-audit query --dir "$T/audit" "$@"; }
n_pkg() { audit_q --kind package | wc -l; }

# Sourced by the pool-level kz-lease tests after tests/e2e/lib.sh: a real
# store and kz-lease, with stand-in workers (standin-worker.py, or
# bad-worker.sh) so that the pool can be tested at a load and with faults
# no real sandbox gives; audit off (the explicit opt-out, kaizen.conf(5)):
# what these files test is the pool.
#   standin_env        the store, a field key, the stand-ins' cgroup parent
#                      and the environment; every stand-in and cgroup is
#                      removed at exit.  Set LEASE_* after it.
#   standin_cleanup    that removal alone (CG, the cgroup parent), for a
#                      test with a store of its own
#   standin_serve ...  kz-lease serve on $S (more arguments passed on), its
#                      log $T/lease.log, its pid in LPID
#   st FIELD; wait_for FIELD VALUE [TRIES of 0.1 s]; field FILE KEY
# standin_cleanup: the stand-ins' cgroup parent in CG; at exit every
# stand-in of this test is killed (they outlive kz-lease: a controller
# starts them on their own) and then its cgroups are removed.
standin_cleanup() {
	CG=kzt-$$
	on_exit "for c in memory pids; do rmdir /sys/fs/cgroup/\$c/$CG/* /sys/fs/cgroup/\$c/$CG 2>/dev/null; done"
	on_exit "pkill -f -- '--socket $T/' 2>/dev/null"
}

standin_env() {
	start_store
	head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
	standin_cleanup
	export KZ_AUDIT=off
	export KZ_RUN_DIR=$T KZ_STORE_SOCKET=$STORE_SOCK STANDIN_CGROUP=$CG
	export KZ_FIELD_KEY_FILE=$T/field.key
	export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/standin-worker.py
	S=$T/kz-lease.sock
}

standin_serve() {
	bg kz-lease serve --socket "$S" "$@" 2>"$T/lease.log"
	LPID=$LASTPID
	wait_sock "$S"
}

st() { kz-lease status --socket "$S" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
wait_for() { local i; for i in $(seq 1 ${3:-200}); do [ "$(st "$1")" = "$2" ] && return 0; sleep 0.1; done; return 1; }
field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

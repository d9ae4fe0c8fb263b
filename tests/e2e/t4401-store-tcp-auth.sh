#!/bin/bash
# The store over TCP with ACL authentication, for every store client
# (kz-lease, kz-reset, kz-project): the pool works over TCP; a wrong
# password, a missing or group/world-readable password file, one of user
# and password without the other, and a plaintext store off this host
# without authentication are each refused with one line and the exit
# status kaizen.conf(5) gives (2 for configuration, 3 for a store that
# refuses us); the password appears in no log, output or error.
. "$(dirname "$0")/lib.sh"
plan 25
SRV=$(command -v valkey-server || command -v redis-server)
PW="pw-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PORT=$((30000 + $$ % 20000))
bg "$SRV" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$T" --daemonize no --loglevel warning --logfile "$T/store.log" \
	--user default off --user kz on ">$PW" '~*' '&*' '+@all'
STORE_PID=$LASTPID
for i in $(seq 50); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q NOAUTH && break; sleep 0.1; done
printf '%s\n' "$PW" >"$T/store.pass"; chmod 600 "$T/store.pass"
printf 'not-%s\n' "$PW" >"$T/wrong.pass"; chmod 600 "$T/wrong.pass"
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"
. "$TOP/tests/unit/kz-lease/standin.sh"
standin_cleanup
export KZ_AUDIT=off KZ_RUN_DIR=$T STANDIN_CGROUP=$CG KZ_FIELD_KEY_FILE=$T/field.key
export KZ_PROJECT_BLOB_DIR=$T/blobs
export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/standin-worker.py
export LEASE_CAPACITY=2 LEASE_STORE_TIMEOUT_MS=500 LEASE_RECONCILE_MS=300
export KZ_STORE_SOCKET=tcp:127.0.0.1:$PORT KZ_STORE_USER=kz KZ_STORE_PASSWORD_FILE=$T/store.pass
S=$T/kz-lease.sock
bg kz-lease serve --socket "$S" 2>"$T/lease.log"
wait_sock "$S"
t "kz-lease over TCP with ACL auth: two workers warm" wait_for warm 2
kz-lease lease --socket "$S" --actor a --conversation c >"$T/l1" 2>&1
ok $? "a lease over TCP is granted"
is "$(redis-cli -p "$PORT" --user kz --pass "$PW" --no-auth-warning scard 'kz:{default}:s:leased')" 1 \
	"the lease is in the TCP store"
rcli() { redis-cli -p "$PORT" --user kz --pass "$PW" --no-auth-warning "$@"; }
D0=$(rcli dbsize)
t "kz-project over TCP with ACL auth" kz-project member-create --member alice
D1=$(rcli dbsize)
t "kz-project's member is in the TCP store ($D0 -> $D1 keys)" test "$D1" -gt "$D0"
# kz-reset of a worker that is not resetting: it reaches the store and
# refuses (exit 1, stale_token) rather than failing to connect.
rc_is 1 "kz-reset over TCP with ACL auth reaches the store (stale_token)" \
	kz-reset --worker nosuch --token x:1

# A wrong password: the store refuses us (exit 3), one line, no password.
rc_is 3 "kz-reset with a wrong password exits 3" \
	env KZ_STORE_PASSWORD_FILE="$T/wrong.pass" kz-reset --worker w --token x:1
like "$(cat "$T/.out")" "refused authentication for user kz" "it says the store refused user kz"
is "$(grep -v 'audit is off' "$T/.out" | wc -l)" 1 "in one line (besides the audit-off notice)"
cp "$T/.out" "$T/out.reset-wrong"
rc_is 3 "kz-project with a wrong password exits 3" \
	env KZ_STORE_PASSWORD_FILE="$T/wrong.pass" kz-project member-create --member bob
like "$(cat "$T/.out")" "refused authentication" "kz-project says the store refused it"
cp "$T/.out" "$T/out.project-wrong"
# No credentials against an ACL store on loopback (allowed by the config).
rc_is 3 "kz-reset without credentials against an ACL store exits 3" \
	env -u KZ_STORE_USER -u KZ_STORE_PASSWORD_FILE kz-reset --worker w --token x:1
like "$(cat "$T/.out")" "requires authentication" "it says the store requires authentication"

# Configuration refusals: exit 2 before any connection.
chmod 644 "$T/store.pass"
rc_is 2 "a world-readable password file: kz-reset exits 2" kz-reset --worker w --token x:1
like "$(cat "$T/.out")" "KZ_STORE_PASSWORD_FILE.*not readable by group or others" "it names the file's mode"
rc_is 2 "a world-readable password file: kz-lease exits 2" kz-lease serve --socket "$T/x.sock"
chmod 640 "$T/store.pass"
rc_is 2 "a group-readable password file: kz-project exits 2" kz-project member-create --member bob
chmod 600 "$T/store.pass"
rc_is 2 "a missing password file exits 2" env KZ_STORE_PASSWORD_FILE="$T/nope" kz-reset --worker w --token x:1
rc_is 2 "a user without a password file exits 2" env -u KZ_STORE_PASSWORD_FILE kz-reset --worker w --token x:1
# A private address (never routed here: refused before any packet).
rc_is 2 "a plaintext store off this host without auth: kz-lease exits 2" \
	env -u KZ_STORE_USER -u KZ_STORE_PASSWORD_FILE KZ_STORE_SOCKET=tcp:10.255.77.1:6379 \
	kz-lease serve --socket "$T/y.sock"
like "$(cat "$T/.out")" "off this host needs KZ_STORE_USER" "it says a remote store needs authentication"
rc_is 2 "the same for a Sentinel address (kz-project)" \
	env -u KZ_STORE_USER -u KZ_STORE_PASSWORD_FILE \
	KZ_STORE_SOCKET=sentinel:10.255.77.1:26379,10.255.77.2:26379/kz kz-project member-create --member bob

# The daemon with a wrong password: admission stays closed, and its log
# says why (once), without the password.
bg env KZ_STORE_PASSWORD_FILE="$T/wrong.pass" kz-lease serve --socket "$T/w.sock" 2>"$T/lease-wrong.log"
wait_sock "$T/w.sock"
logged() { local i; for i in $(seq 50); do grep -q '"store.unavailable"' "$T/lease-wrong.log" && return 0; sleep 0.1; done; return 1; }
t "kz-lease with a wrong password logs why the store is unavailable" logged
is "$(grep -c '"store.unavailable"' "$T/lease-wrong.log")" 1 "it says so once, not at every tick"

cat "$T"/lease.log "$T"/lease-wrong.log "$T"/out.* "$T"/store.log >"$T/all.txt" 2>/dev/null
t "the password appears in no log, output or error" sh -c "! grep -qF -- '$PW' '$T/all.txt'"
done_testing

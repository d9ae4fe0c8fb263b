#!/bin/bash
# The controller boundary (kz-controller(7)): kz-lease drives real
# kz-sandbox workers through an executable controller, here a test one
# (tests/ctl/fault-ctl.py) that passes calls to kz-ctl-local or fails
# them.  A controller that hangs or answers garbage is killed and closes
# admission until its inventory is read again; a create whose controller
# died mid-call stays counted until reconcile deletes it; a controller
# that lies about its inventory never gets a worker uncounted (an omitted
# one is held and deleted first) nor a phantom counted or leased; a create
# answered with another worker's endpoint never gives that worker a
# second owner.  Throughout, a sampler checks that every worker directory
# that exists is counted by the store and that the pool never exceeds its
# capacity.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 34
export LEASE_CONTROLLER=$TOP/tests/ctl/fault-ctl CTL_REAL=$BIN/kz-ctl-local
export LEASE_CONTROLLER_TIMEOUT_MS=3000 LEASE_CREATE_TIMEOUT_MS=5000
export LEASE_RECONCILE_MS=500
# The calls other than delete block kz-lease's loop (kz-controller(7)):
# the test controller's Python on a loaded host must not pass for a store
# that stopped answering.
export LEASE_STORE_TIMEOUT_MS=5000
M=$T/ctl-mode OPS=$T/ctl-ops
echo good >"$M"
start_stack 2
workers() { ls "$T/workers" 2>/dev/null | grep '^w'; }
# status FIELD without a Python start per look (stack.sh's st), as
# status prints it: true, false, numbers; and wait_for on it.
st() { kz-lease status --socket "$S" | grep -o "\"$1\":[^,}]*" | cut -d: -f2; }
wait_for() { local i; for i in $(seq 1 ${3:-200}); do [ "$(st "$1")" = "$2" ] && return 0; sleep 0.1; done; return 1; }
lease() { kz-lease lease --socket "$S" --actor "$1" --conversation c --ttl-ms "${2:-60000}"; }
# The sampler of t4104: directories listed both before and after a status
# call existed throughout it, so that status must count them ("n total").
( while :; do
	d1=$(workers); tot=$(kz-lease status --socket "$S" 2>/dev/null | grep -o '"total":[0-9]*' | cut -d: -f2); d2=$(workers)
	n=$(comm -12 <(echo "$d1" | grep . | sort) <(echo "$d2" | grep . | sort) | wc -l)
	[ -n "$tot" ] && echo "$n $tot" >>"$T/totals"
	sleep 0.1
done ) & SAMPLER=$!
on_exit "kill $SAMPLER 2>/dev/null"

t "the pool fills through the executable controller" wait_for warm 2
W1=$(workers | head -1)
is "$(kz-ctl-local list | sort | tr '\n' ' ')" "$(workers | sort | tr '\n' ' ')" "the controller's inventory is the pool's workers (kz-ctl-local list)"
is "$(tr '\0' '\n' <"/proc/$(cat "$T/workers/$W1/pid")/environ" | grep '^SANDBOX_RUNTIME=')" \
	"SANDBOX_RUNTIME=native" "the worker runs under the runtime kz-lease asked for (LEASE_WORKER_RUNTIME)"

# ---- a controller that hangs ----
echo list:hang >"$M"
t "a list that hangs closes admission" wait_for admission false 50
rc_is 3 "no lease is granted while the controller is unconfirmed" lease alice
echo good >"$M"
t "admission reopens once the inventory is read again" wait_for admission true 50
HP=$(grep '^list .* hang ' "$OPS" | head -1 | cut -d' ' -f4)
tnot "the hung controller ($HP) was killed (it ignores SIGTERM)" kill -0 "$HP"
like "$(grep -c '"controller.fault"' "$T/lease.log")" '^[1-9]' "the fault was logged"

# ---- garbage ----
echo list:garbage >"$M"
t "a list answered with garbage closes admission" wait_for inventory false 50
echo list:badjson >"$M"
sleep 0.5
is "$(st admission)" false "... and so does one answered with invalid JSON"
echo good >"$M"
t "admission reopens after garbage" wait_for admission true 50

# ---- a phantom worker ----
: >"$OPS"
echo list:phantom >"$M"
t "a phantom the controller lists is deleted, not adopted" sh -c "for i in \$(seq 1 50); do grep -q '^delete wphantom0001' '$OPS' && exit 0; sleep 0.1; done; exit 1"
is "$(st total)" 2 "the phantom is not counted"
lease alice >"$T/alice" 2>&1
is "$?" 0 "a lease still gets a worker"
tnot "... a real one, not the phantom" grep -q wphantom0001 "$T/alice"
echo good >"$M"

# ---- a worker the controller omits, and a create that steals an endpoint
# The warm worker (not alice's) is left out of the list: kz-lease holds it,
# counted, and deletes it before the store forgets it.  Its replacement's
# create is answered with alice's worker's endpoint.
ALICE=$(field "$T/alice" worker) AEP=$(field "$T/alice" endpoint)
WO=$(workers | grep -v "^$ALICE\$" | head -1)
echo "$WO" >"$T/ctl-omit"
: >"$OPS"
echo "list:omit create:steal" >"$M"
t "an omitted worker is deleted, not forgotten" sh -c "for i in \$(seq 1 50); do [ -d '$T/workers/$WO' ] || exit 0; sleep 0.1; done; exit 1"
like "$(cat "$OPS")" "delete $WO " "kz-lease confirmed its absence with a delete"
t "its replacement's create was answered with alice's endpoint" sh -c "for i in \$(seq 1 50); do grep -q '^create .* steal' '$OPS' && exit 0; sleep 0.1; done; exit 1"
WS=$(grep '^create .* steal' "$OPS" | head -1 | cut -d' ' -f2)
# (A call slower than the deadline on a loaded host closes admission too:
# wait for it to be open, or the refusal below would prove nothing.)
wait_for admission true 50
rc_is 1 "bob gets no worker: alice's is not handed out twice" lease bob
[ -s "$T/.out" ] && diag "alice $ALICE, omitted $WO, stolen $WS, workers now: $(workers | tr '\n' ' '); bob: $(cat "$T/.out")"
is "$(st warm)" 0 "the stolen create never became warm"
echo good >"$M"
t "past the create grace reconcile deletes it" sh -c "for i in \$(seq 1 80); do [ -d '$T/workers/$WS' ] || exit 0; sleep 0.1; done; exit 1"
t "a good create then refills the pool" wait_for warm 1 80
rc_is 0 "bob gets a worker" lease bob
unlike "$(field "$T/.out" endpoint)" "^$AEP\$" "... not alice's"

# ---- a controller that dies mid-create ----
# Alice's lease expires: her worker is retired and deleted, and the
# replacement's controller starts the worker, then dies without a word.
: >"$OPS"
echo create:die >"$M"
kz-lease release --socket "$S" --lease-id "$(field "$T/.out" lease_id)" --token "$(field "$T/.out" token)" >/dev/null 2>&1
wait_for warm 1 100
lease carol 300 >/dev/null 2>&1
t "a create whose controller died is made" sh -c "for i in \$(seq 1 80); do grep -q '^create .* die' '$OPS' && exit 0; sleep 0.1; done; exit 1"
WD=$(grep '^create .* die' "$OPS" | head -1 | cut -d' ' -f2)
echo good >"$M"
t "its worker stays counted until reconcile deletes it" sh -c "for i in \$(seq 1 80); do [ -d '$T/workers/$WD' ] || exit 0; sleep 0.1; done; exit 1"
t "a good replacement is warm beside alice's lease" wait_for warm 1 100

# ---- a create answered with a listener of the controller's own ----
# It names the worker's id and claims a clean wipe, but it is not the
# agent the controller recorded: the reset that follows its first lease
# retires it (endpoint_agent), it is never published warm again.
on_exit 'for f in '"$T"'/parrot-*.pid; do [ -f "$f" ] && kill "$(cat "$f")"; done 2>/dev/null'
lease dave >"$T/dave" 2>&1
echo create:parrot >"$M"
kz-lease release --socket "$S" --lease-id "$(field "$T/dave" lease_id)" --token forged >/dev/null 2>&1
t "a create is answered with the controller's own listener" sh -c "for i in \$(seq 1 80); do grep -q '^create .* parrot' '$OPS' && exit 0; sleep 0.1; done; exit 1"
echo good >"$M"
WP=$(grep '^create .* parrot' "$OPS" | head -1 | cut -d' ' -f2)
for _ in $(seq 1 100); do lease erin >"$T/erin" 2>&1 && grep -q "parrot-$WP" "$T/erin" && break
	kz-lease release --socket "$S" --lease-id "$(field "$T/erin" lease_id 2>/dev/null)" --token "$(field "$T/erin" token 2>/dev/null)" >/dev/null 2>&1
	sleep 0.1; done
like "$(field "$T/erin" endpoint)" "parrot-$WP" "its first lease goes to the listener (health names the id)"
w0=$(st resets_warm)
kz-lease release --socket "$S" --lease-id "$(field "$T/erin" lease_id)" --token "$(field "$T/erin" token)" >/dev/null 2>&1
t "the reset after it retires the worker" sh -c "for i in \$(seq 1 80); do grep '\"worker.retire\"' '$T/lease.log' | grep -q '$WP' && exit 0; sleep 0.1; done; exit 1"
like "$(grep '"reset.evidence"\|"worker.retire"\|"reset.retire"' "$T/lease.log" | grep "$WP" | tail -3)" 'endpoint_agent' \
	"naming the missing item: the listener is not the worker's agent"
is "$(st resets_warm)" "$w0" "and nothing was published warm from it"

diag "$(grep -c '"controller.fault"' "$T/lease.log") controller calls failed in all"
kill "$SAMPLER"
is "$(awk '{print $2}' "$T/totals" | sort -n | tail -1)" 2 "the pool never exceeded its capacity"
is "$(awk '$2 < $1' "$T/totals" | wc -l)" 0 "no worker directory was ever left uncounted ($(wc -l <"$T/totals") samples)"
# What kz-lease said about its controller, when something failed.
[ "$_fail" = 0 ] || grep -E '"(controller.fault|inventory.fail|admission.close|create.fail|worker.retire|worker.deleted|create.ready)"' "$T/lease.log" | tail -40 | sed 's/^/# /'
done_testing

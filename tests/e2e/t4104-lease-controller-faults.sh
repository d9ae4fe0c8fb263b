#!/bin/bash
# Worker faults behind the default controller (kz-ctl-local, run by
# kz-lease through kz-controller(7)): a create that hangs and one whose
# process dies stay counted against capacity (creating) until
# reconciliation proves them absent or deletes them; the pool never holds
# more than its capacity, and a good create afterwards fills it.  Faults
# of the controller itself are t4106's.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/standin.sh"
plan 11
standin_env
export LEASE_WORKER_BIN=$TOP/tests/unit/kz-lease/bad-worker.sh
export LEASE_CAPACITY=1 LEASE_RECONCILE_MS=300 LEASE_CREATE_TIMEOUT_MS=2500
echo hang >"$T/worker-mode"
standin_serve
# Samples the pool every 0.1 s (directories only: kz-ctl-local keeps a failed
# worker's log as workers/last-failed.log): the worker directories listed both before
# and after a status call existed throughout it, so that status must count
# at least that many ("n total" per line).
( while :; do
	d1=$(ls -d "$T"/workers/*/ 2>/dev/null); tot=$(kz-lease status --socket "$S" 2>/dev/null | grep -o "\"total\":[0-9]*" | cut -d: -f2); d2=$(ls -d "$T"/workers/*/ 2>/dev/null)
	n=$(comm -12 <(echo "$d1" | grep . | sort) <(echo "$d2" | grep . | sort) | wc -l)
	[ -n "$tot" ] && echo "$n $tot" >>"$T/totals"
	sleep 0.1
done ) & SAMPLER=$!
on_exit "kill $SAMPLER 2>/dev/null"

t "a hanging create is counted as creating" wait_for creating 1 30
W1=$(ls "$T/workers" | head -1)
P1=$(cat "$T/workers/$W1/pid")
is "$(st warm)" 0 "and is not warm"
rc_is 1 "no lease is granted from it" kz-lease lease --socket "$S" --actor a --conversation c
t "past the create grace reconcile deletes it" sh -c "for i in \$(seq 1 60); do [ -d '$T/workers/$W1' ] || exit 0; sleep 0.1; done; exit 1"
# Gone, or a zombie waiting for whichever subreaper adopted it.
gone() { local s; s=$(ps -o stat= -p "$1"); [ -z "$s" ] || [ "${s#Z}" != "$s" ]; }
t "its process is gone" gone "$P1"

echo die >"$T/worker-mode"
t "a create whose process died is counted too" sh -c "for i in \$(seq 1 60); do w=\$(ls '$T/workers' 2>/dev/null | grep -v '^$W1\$' | head -1); [ -n \"\$w\" ] && exit 0; sleep 0.05; done; exit 1"
W2=$(ls "$T/workers" | head -1)
# The store counts a create before its directory exists and forgets it
# only after the directory is gone: a directory still present after the
# status call was counted in it.
tot=$(st total)
t "it holds its place in the capacity ($tot)" sh -c "[ ! -d '$T/workers/$W2' ] || [ '$tot' = 1 ]"
echo good >"$T/worker-mode"
t "reconcile removes the dead create" sh -c "for i in \$(seq 1 60); do [ -d '$T/workers/$W2' ] || exit 0; sleep 0.1; done; exit 1"
t "a good create then fills the pool" wait_for warm 1 60
kill "$SAMPLER"
is "$(awk '{print $2}' "$T/totals" | sort -n | tail -1)" 1 "the pool never exceeded its capacity"
is "$(awk '$2 < $1' "$T/totals" | wc -l)" 0 "no existing worker directory was ever left uncounted ($(wc -l <"$T/totals") samples)"
done_testing

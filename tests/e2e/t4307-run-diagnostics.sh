#!/bin/bash
# kz-run --json: one JSON object on stdout with the two diagnostic
# projections.  The model's is a bounded tail of stdout and stderr
# (RUN_TAIL_MAX, 4096 bytes each), the exit status, the signal and the
# limit hit; the members' is a status (succeeded, failed, timed_out,
# refused, with the refusal's one line) that carries no output bytes.
# Declared outputs come back as a durable reference, never bytes; their
# placeholders carry no resource id and name the call only by kz-project's
# run-bound room reference, never the caller's call id.  A compressor that
# fails leaves the already-authorized tails as they were; one that works
# shortens only the model's tails, never the raw output.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 39
# The workers' own time limit, short, so that a run can hit it.
export SANDBOX_TIMEOUT=3
. "$TOP/tests/e2e/room-run-lib.sh"

q member-create --member alice && q member-create --member bob &&
	q room-create --room r1 --member alice && q room-join --room r1 --member bob
ok $? "a room of alice and bob"
j() { "$PY" -c 'import json,sys
d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    d = d[int(k)] if isinstance(d, list) else d.get(k)
print("null" if d is None else json.dumps(d) if isinstance(d, (dict, list, bool)) else d)' "$1" "$2"; }

# ---- a run that succeeds, with an output and a provider's call id
kz-run --json --room r1 --member alice --call call_PROVIDER_77 \
	--output report.txt -- sh -c 'echo OUT-LINE; echo ERR-LINE >&2; echo REPORT-BYTES >report.txt' \
	>"$T/j1" 2>"$T/e1"
is "$?" 0 "a run with --json exits 0"
is "$(wc -l <"$T/j1")" 1 "stdout is one line"
t "and it is one JSON object" "$PY" -c "import json; json.load(open('$T/j1'))"
is "$(j "$T/j1" model.stdout_tail)" "OUT-LINE" "the model gets the stdout tail"
is "$(j "$T/j1" model.stderr_tail)" "ERR-LINE" "and the stderr tail"
is "$(j "$T/j1" model.exit_status)" 0 "and the exit status"
is "$(j "$T/j1" model.limit)" null "and no limit"
is "$(j "$T/j1" members)" '{"status": "succeeded"}' "the members get the status alone"
is "$(j "$T/j1" outputs.0.linked)" true "the declared output was linked"
like "$(j "$T/j1" outputs.0.resource)" "^out-[0-9a-f]+$" "by its durable reference"
unlike "$(cat "$T/j1")" "REPORT-BYTES" "never its bytes"
is "$(j "$T/j1" placeholders.0.name)" "report.txt" "the placeholder names the output"
like "$(j "$T/j1" placeholders.0.ref)" "^[0-9a-f]{32,}$" "and the call by a room reference"
unlike "$(j "$T/j1" placeholders)" "out-" "it carries no resource id"
unlike "$(cat "$T/j1")" "call_PROVIDER_77" "the provider's call id never comes back"
unlike "$(cat "$T/e1")" "OUT-LINE|ERR-LINE" "with --json the raw output is not printed besides"

# ---- bounds: the tail is the last RUN_TAIL_MAX bytes
kz-run --json --actor alice --conversation c2 -- sh -c \
	'i=0; while [ $i -lt 2000 ]; do echo "line $i ........"; i=$((i+1)); done; echo LAST-LINE; exit 3' \
	>"$T/j2" 2>"$T/e2"
is "$?" 3 "a failing run exits with its status"
n=$("$PY" -c "import json; print(len(json.load(open('$T/j2'))['model']['stdout_tail'].encode()))")
is "$n" 4096 "the stdout tail is bounded at 4096 bytes"
tl=$(j "$T/j2" model.stdout_tail)
is "${tl##*$'\n'}" "LAST-LINE" "and ends with the last line"
is "$(j "$T/j2" members.status)" failed "the members see failed"
unlike "$(j "$T/j2" members)" "line|LAST" "and no output bytes"

# ---- the worker's time limit
kz-run --json --actor alice --conversation c3 -- sh -c 'echo started; sleep 30' >"$T/j3" 2>"$T/e3"
is "$(j "$T/j3" model.limit)" timeout "the model sees the limit hit"
is "$(j "$T/j3" members.status)" timed_out "the members see timed_out"

# ---- a refusal
kz-run --json --actor alice --conversation c4 --capability code.nope -- true >"$T/j4" 2>"$T/e4"
is "$?" 1 "a refused run exits 1"
is "$(j "$T/j4" members.status)" refused "the members see refused"
is "$(j "$T/j4" members.reason)" "the run asks for more than its capability allows" \
	"with the refusal's one line"
is "$(j "$T/j4" model.exit_status)" null "and the model sees no exit status"

kz-run --json --room r1 --member alice --capability code.run.private \
	--output report.txt -- true >"$T/j6" 2>"$T/e6"
is "$(j "$T/j6" outputs.0.reason)" "the run did not complete: nothing was read" \
	"an output of a refused run is reported as not read"

# ---- a compressor that works: only the model's tail is shortened
LONG=$(printf 'a%.0s' $(seq 1 300))
RUN_COMPRESS_CMD='tr -s a' kz-run --json --actor alice --conversation c5 -- \
	sh -c "echo $LONG" >"$T/j8" 2>"$T/e8"
is "$(j "$T/j8" model.stdout_tail)" "a" "a compressor shortens the model's stdout tail"
is "$(j "$T/j8" model.stdout_compressed)" true "and says so"
# (Not "aaa" anywhere: a random hex id in the JSON may hold it.)
is "$(grep -c "$(printf 'a%.0s' $(seq 1 20))" "$T/j8")" 0 "the raw output is nowhere in the JSON"
is "$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["members"])' "$T/j8")" "{'status': 'succeeded'}" \
	"the members' projection carries no output: its status alone"
RUN_COMPRESS_CMD='tr -s a' kz-run -q --actor alice --conversation c5 -- \
	sh -c "echo $LONG" >"$T/o8" 2>>"$T/e8"
is "$(cat "$T/o8")" "$LONG" "the raw output a compressor saw is unchanged"

# ---- a compressor that fails: the tails stay as they were
RUN_COMPRESS_CMD=/bin/false kz-run --json --actor alice --conversation c5 -- \
	sh -c 'echo KEEP-ME' >"$T/j5" 2>"$T/e5"
is "$(j "$T/j5" model.stdout_tail)" "KEEP-ME" "a failed compression falls back to the original"
is "$(j "$T/j5" model.stdout_compressed)" false "and says it was not compressed"
RUN_COMPRESS_CMD=/bin/false kz-run -q --actor alice --conversation c5 -- \
	sh -c 'printf "raw\\n  bytes\\n"' >"$T/o7" 2>"$T/e7"
is "$(od -c <"$T/o7" | head -2)" "$(printf 'raw\n  bytes\n' | od -c | head -2)" \
	"with a compressor configured the raw output is unchanged"
done_testing

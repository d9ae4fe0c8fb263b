#!/bin/bash
# kz-run checks the capability a run names before anything is admitted or
# leased: an unknown capability, --egress under one that allows no egress
# and --output under one that links nothing are each refused with one line
# (exit 1), audited as an isolation denial (stage capability) with the
# correlation fields, and never reach a worker; a capability of the set
# that allows what the run asks for runs.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 19
start_stack 1
t "a real worker becomes warm" wait_for warm 1

leases() { audit_q --kind lease | wc -l; }
denials() { audit_q --kind isolation_denial | grep -c '"stage":"capability"'; }

kz-run -q --actor alice --conversation c1 -- sh -c 'echo ran' >"$T/o" 2>"$T/e"
is "$?" 0 "the default capability (code.run) runs"
kz-run -q --actor alice --conversation c1 --capability code.run.private \
	-- sh -c 'echo ran' >"$T/o" 2>"$T/e"
is "$?" 0 "code.run.private runs"
l0=$(leases)

kz-run --actor alice --conversation c1 --capability code.root \
	-- sh -c 'echo ran' >"$T/o" 2>"$T/e"
is "$?" 1 "an unknown capability is refused (exit 1)"
is "$(wc -l <"$T/e")" 1 "with one line"
like "$(cat "$T/e")" "^kz-run: refused: capability 'code.root' is not one of the run capabilities" \
	"naming the capability"
is "$(cat "$T/o")" "" "and nothing ran"

kz-run --actor alice --conversation c1 --egress -- sh -c 'echo ran' >"$T/o" 2>"$T/e"
is "$?" 1 "--egress under code.run is refused"
like "$(cat "$T/e")" "^kz-run: refused: capability code.run does not allow egress$" \
	"naming the capability and what it does not allow"
kz-run --actor alice --conversation c1 --capability code.run.private --egress \
	-- sh -c 'echo ran' >"$T/o" 2>"$T/e"
is "$?" 1 "--egress under code.run.private is refused"
kz-run --room r1 --member alice --capability code.run.private --output out.txt \
	-- sh -c 'echo ran >out.txt' >"$T/o" 2>"$T/e"
is "$?" 1 "--output under code.run.private is refused"
like "$(cat "$T/e")" "does not allow linking outputs" "saying outputs are not allowed"

is "$(leases)" "$l0" "no refused run leased a worker"
is "$(denials)" 4 "each refusal is one isolation denial at stage capability"
rec=$(audit_q --kind isolation_denial | grep '"stage":"capability"' | head -1)
like "$rec" '"actor_hash":"[0-9a-f]+"' "with the actor's hash"
like "$rec" '"conversation_hash":"[0-9a-f]+"' "the conversation's"
like "$rec" '"manifest_digest":"sha256:[0-9a-f]{64}"' "and the manifest digest"
like "$rec" '"capability":"unknown"' "an unknown capability is recorded as unknown"
unlike "$(audit_q)" "code.root" "the made-up name never enters the audit"
done_testing

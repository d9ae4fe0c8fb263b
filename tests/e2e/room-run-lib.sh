# Sourced by the kz-run --room e2e tests after lib.sh and
# tests/unit/kz-lease/stack.sh: the lease stack with one real worker and a
# kz-project daemon, both checked as tests (2 of the plan), and helpers to
# fill kz-project: q CMD ARGS (one-shot, quiet), blob TEXT (its sha256),
# doc OWNER RID PATH CONTENT (a resource with one ready version), n_kind
# KIND (audit records of that kind).
start_stack 1
export KZ_PROJECT_SOCKET=$T/kz-project.sock KZ_PROJECT_BLOB_DIR=$T/blobs
bg kz-project serve --socket "$KZ_PROJECT_SOCKET" 2>"$T/project.log"
t "kz-project serves" wait_sock "$KZ_PROJECT_SOCKET"
t "a real worker becomes warm" wait_for warm 1

PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
q() { kz-project "$@" >/dev/null 2>"$T/q.err" || { cat "$T/q.err" >&2; return 1; }; }
blob() { printf '%s' "$1" >"$T/in"; kz-project blob-put --file "$T/in" |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin)["sha256"])'; }
doc() { q resource-create --resource "$2" --member "$1" --kind document &&
	q version-new --resource "$2" --member "$1" --path "$3" --blob "$(blob "$4")"; }
n_kind() { audit_q --kind "$1" | wc -l; }

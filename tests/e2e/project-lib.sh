# Shared set-up for the kz-project tests (sourced after lib.sh and plan): a
# real store, a field key, a blob dir, and helpers around the one-shot CLI.
start_store || { echo "Bail out! no store"; exit 1; }
export KZ_STORE_SOCKET=$STORE_SOCK KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/field.key \
	KZ_PROJECT_BLOB_DIR=$T/blobs
unset KZ_AUDIT_SOCKET KZ_CONFIG
# The rules are what these files test, not the audit: the explicit opt-out
# (kaizen.conf(5)); a test of the audit turns it on with a sink of its own.
export KZ_AUDIT=off
# The system interpreter: a version-manager shim costs half a second a call.
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"

q() { kz-project "$@" >/dev/null 2>&1; }
js() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
blob() { printf '%s' "$1" >"$T/in"; kz-project blob-put --file "$T/in" |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin)["sha256"])'; }
# doc OWNER RID PATH CONTENT [KIND]: a resource with one ready version.
doc() { q resource-create --resource "$2" --member "$1" --kind "${5:-document}" &&
	q version-new --resource "$2" --member "$1" --path "$3" --blob "$(blob "$4")"; }
# adm NAME ARGS...: admit, snapshot in $T/NAME.json, reason in $T/NAME.err.
adm() { local n=$1; shift; kz-project admit "$@" >"$T/$n.json" 2>"$T/$n.err"; }
ids() { js "$T/$1.json" '",".join(i["id"] for i in d["items"])'; }
code() { kz-project "$@" 2>&1 >/dev/null | sed -n 's/^kz-project: \([a-z_]*\):.*/\1/p'; }
# left NAME: what admission NAME left out (the place rule), id:reason in line.
left() { js "$T/$1.json" '",".join(o["id"]+":"+o["reason"] for o in d.get("left_out", []))'; }
# why CMD...: the one-line reason of a refused one-shot command.
why() { kz-project "$@" 2>&1 >/dev/null | sed -n 's/^kz-project: [a-z_]*: //p'; }

#!/bin/bash
# The shipped systemd deployment across users.  Each daemon runs under the
# User=, Group=, SupplementaryGroups=, UMask= and Environment= its unit in
# etc/systemd names (numeric ids stand in for the names, by setpriv; no
# /etc/passwd edit), its RuntimeDirectory=/StateDirectory= and the run dir
# of etc/tmpfiles.d made as systemd would, its field key a private 0400
# copy as LoadCredential= gives it: the store (kz-store.service), kz-audit,
# kz-lease (root, group kaizen) with a real kz-sandbox worker, kz-project.
# Then an operator (a uid whose only link to the deployment is kaizen as a
# supplementary group) runs code with a projected file and a room turn;
# a uid outside kaizen is refused by every socket, and one that bypasses
# the file modes (CAP_DAC_OVERRIDE) is refused by the peer check.
. "$(dirname "$0")/lib.sh"
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (daemons run under other uids)"
command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
SRV=$(command -v valkey-server || command -v redis-server) ||
	skip "no valkey-server or redis-server"
U=$TOP/etc/systemd

# Ids no account on this host has: the unit's names map to these.
B=47100
for i in 1 2 3 4 10 11 20 21; do
	getent passwd $((B + i)) >/dev/null && skip "uid $((B + i)) is taken"
	getent group $((B + i)) >/dev/null && skip "gid $((B + i)) is taken"
done
KAIZEN=$((B + 10)) STOREG=$((B + 11)) OPER=$((B + 20)) OUTS=$((B + 21))
uid_of() { case $1 in root) echo 0 ;; kz-audit) echo $((B + 1)) ;;
	kz-project) echo $((B + 2)) ;; kz-store) echo $((B + 3)) ;;
	kz-egress) echo $((B + 4)) ;; *) return 1 ;; esac; }
gid_of() { case $1 in root) echo 0 ;; kaizen) echo "$KAIZEN" ;;
	kz-store) echo "$STOREG" ;; *) return 1 ;; esac; }
# The binaries and sample configs as an install lays them out (0755 and
# 0644, in directories every uid may traverse): the other uids cannot
# reach a checkout under /root, where CI's clone may be.
install -d -m 0755 "$T/bin" "$T/etc" "$T/etc/kaizen" "$T/libexec/kaizen"
install -m 0755 "$BIN"/kz-* "$T/bin/"
install -m 0755 "$TOP"/libexec/kaizen/kz-sandbox-tar "$T/libexec/kaizen/"
install -m 0644 "$TOP"/etc/kaizen/*.conf "$T/etc/kaizen/"
BIN=$T/bin CONF=$T/etc/kaizen PATH=$T/bin:$PATH
setpriv --reuid $OPER --regid $OPER --clear-groups test -x "$BIN/kz-run" ||
	{ echo "Bail out! $BIN is not executable by other users"; exit 1; }

RUN=$T/run LIB=$T/lib CRED=$T/cred
# A unit's setting (the last one wins) and its Environment= entries.
unit() { sed -n "s/^$2=//p" "$U/$1.service" | tail -1; }
unit_env() { sed -n 's/^Environment=//p' "$U/$1.service"; }
# Host paths and names to this test's: /run/kaizen, /var/lib/kaizen, %d,
# the installed binaries and configs (the units' @BINDIR@, @SYSCONFDIR@ and
# @STORE_SERVER@, which make install fills in), group names in peer lists.
map() { sed -e "s|/run/kaizen|$RUN|g" -e "s|/var/lib/kaizen|$LIB|g" \
	-e "s|%d|$CRED/$2|g" -e "s|@BINDIR@/|$BIN/|g" \
	-e "s|@STORE_SERVER@|$SRV|g" \
	-e "s|@SYSCONFDIR@/kaizen/|$CONF/|g" \
	-e "s|^\(KZ_PEER_GIDS=\)kaizen$|\1$KAIZEN|" <<<"$1"; }

plan 54

# The run dir as etc/tmpfiles.d makes it.
read -r ty path mode owner group _ < <(grep '^d ' "$TOP/etc/tmpfiles.d/kaizen.conf")
is "$ty $path" "d /run/kaizen" "tmpfiles.d makes the run dir"
mkdir -p "$RUN" "$LIB" "$CRED"
chown "$(uid_of "$owner")":"$(gid_of "$group")" "$RUN" && chmod "$mode" "$RUN"
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"

# setup NAME: what systemd does before it starts the unit.
setup() {
	local n=$1 uid gid d m
	uid=$(uid_of "$(unit "$n" User)") gid=$(gid_of "$(unit "$n" Group)")
	for d in $(unit "$n" RuntimeDirectory); do
		m=$(unit "$n" RuntimeDirectoryMode)
		install -d -o "$uid" -g "$gid" -m "${m:-0755}" "$RUN/${d#kaizen/}"
	done
	for d in $(unit "$n" StateDirectory); do
		m=$(unit "$n" StateDirectoryMode)
		install -d -o "$uid" -g "$gid" -m "${m:-0755}" "$LIB/${d#kaizen/}"
	done
	if unit "$n" LoadCredential | grep -q '^field.key:'; then
		install -d -m 0500 -o "$uid" "$CRED/$n"
		install -m 0400 -o "$uid" "$T/field.key" "$CRED/$n/field.key"
	fi
}
# start NAME [VAR=VALUE...]: its ExecStart under its ids, umask and
# environment (and nothing else of ours but PATH and the extras given),
# in the background; FG=1 start ...: in the foreground (a one-shot unit).
start() {
	local n=$1 uid gid groups g um env=() e cmd
	shift
	uid=$(uid_of "$(unit "$n" User)") && gid=$(gid_of "$(unit "$n" Group)") ||
		{ diag "$n: unknown User= or Group="; return 1; }
	groups=$gid
	for g in $(unit "$n" SupplementaryGroups); do
		groups=$groups,$(gid_of "$g") || return 1
	done
	um=$(unit "$n" UMask)
	while read -r e; do [ -n "$e" ] && env+=("$(map "$e" "$n")"); done < <(unit_env "$n")
	eval "cmd=($(map "$(unit "$n" ExecStart)" "$n"))"
	setup "$n"
	set -- env -i PATH="$PATH" "${env[@]}" "$@" setpriv --reuid "$uid" \
		--regid "$gid" --groups "$groups" --no-new-privs \
		sh -c 'umask "$1"; shift; exec "$@"' sh "${um:-0022}" "${cmd[@]}"
	if [ -n "${FG:-}" ]; then "$@"; else bg "$@"; fi
}
# as ID GROUPS CMD...: one command as a uid, primary gid = its own.
as() { local u=$1 g=$2; shift 2; env -i PATH="$PATH" setpriv --reuid "$u" \
	--regid "$u" --groups "$g" "$@"; }
mode() { stat -c '%a %u:%g' "$1"; }

# The units name what the test runs: no unit may run as an unknown user.
for n in kz-store kz-audit kz-lease kz-project; do
	uid_of "$(unit $n User)" >/dev/null && gid_of "$(unit $n Group)" >/dev/null
	ok $? "$n.service names a user and group ($(unit $n User):$(unit $n Group), UMask $(unit $n UMask))"
done

start kz-store >"$T/store.log" 2>&1
STORE=$RUN/store/store.sock
t "the store serves on its unit's socket" wait_sock "$STORE"
start kz-audit 2>"$T/audit.log"
AUD=$RUN/kz-audit/kz-audit.sock
t "kz-audit serves as its unit's user" wait_sock "$AUD"
# LEASE_FILES_SHARE: the environment is cleared, and this host's
# fs.file-max may be too small for even one default worker (lib.sh).
start kz-lease LEASE_CAPACITY=1 LEASE_RECONCILE_MS=500 \
	LEASE_FILES_SHARE=$LEASE_FILES_SHARE 2>"$T/lease.log"
LEASE_PID=$LASTPID
LS=$RUN/kz-lease.sock
t "kz-lease serves as root in group kaizen" wait_sock "$LS"
# Workers are detached from kz-lease: each is stopped by its pid file.
stop_workers() {
	local f p
	for f in "$RUN"/workers/*/pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
	for f in "$RUN"/workers/*/pid; do
		[ -f "$f" ] || continue
		p=$(cat "$f")
		for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
		kill -9 "$p" 2>/dev/null
	done
}
on_exit "kill $LEASE_PID 2>/dev/null; sleep 0.3; stop_workers"
start kz-project 2>"$T/project.log"
PS=$RUN/kz-project/kz-project.sock
t "kz-project serves as its unit's user" wait_sock "$PS"
warm() { kz-lease status --socket "$LS" | python3 -c "import json,sys; sys.exit(json.load(sys.stdin)[\"warm\"] != 1)"; }
for _ in $(seq 1 200); do warm && break; sleep 0.1; done
t "a real worker started by kz-lease becomes warm" warm

# What a user of the host sees.
K=$KAIZEN
is "$(mode "$RUN")" "750 0:$K" "run dir: 0750 root:kaizen"
is "$(mode "$LS")" "660 0:$K" "kz-lease's socket: 0660 root:kaizen"
is "$(mode "$RUN/kz-audit")/$(mode "$AUD")" "750 $((B + 1)):$K/660 $((B + 1)):$K" \
	"kz-audit's socket: 0660 kz-audit:kaizen in a 0750 directory of its own"
is "$(mode "$PS")" "660 $((B + 2)):$K" "kz-project's socket: 0660 kz-project:kaizen"
is "$(mode "$RUN/store")/$(mode "$STORE")" "750 $((B + 3)):$STOREG/660 $((B + 3)):$STOREG" \
	"the store's socket: 0660 kz-store:kz-store in a 0750 directory"
W=$(ls -d "$RUN"/workers/*/ | head -1); W=${W%/}
is "$(mode "$RUN/workers")" "750 0:$K" "workers dir: 0750 root:kaizen (under UMask 0077)"
is "$(mode "$W")" "750 0:$K" "the worker's dir: 0750 root:kaizen"
is "$(mode "$W/sock")" "660 0:$K" "the worker's socket: 0660 root:kaizen"
is "$(mode "$W/projection")" "1775 0:$K" "its projection dir: 01775 root:kaizen"
is "$(mode "$LIB/snapshots")" "750 0:$K" "the snapshot dir, under /var/lib: 0750 root:kaizen"
is "$(stat -c '%a %u' "$CRED/kz-audit/field.key")" "400 $((B + 1))" \
	"each unit reads a private 0400 copy of the field key"

# The operator: in kaizen only as a supplementary group, with only the run
# dir: kz-run finds the units' sockets (kz-audit/kz-audit.sock,
# kz-project/kz-project.sock, kz-lease.sock) by the one rule.
OPENV=(KZ_RUN_DIR="$RUN")
op() { as $OPER "$OPER,$K" env "${OPENV[@]}" "$@"; }
mkdir -m 0700 "$T/op" && echo "from the operator" >"$T/op/hello.txt" &&
	chown -R $OPER:$OPER "$T/op"
op kz-run -q --actor ann --conversation c1 --file "$T/op/hello.txt" -- \
	sh -c 'cat /projection/hello.txt; echo kept > notes; id -u' >"$T/o1" 2>"$T/e1"
is "$?" 0 "the operator's kz-run with --file runs"
is "$(head -1 "$T/o1")" "from the operator" "and the code reads the projected file"
is "$(sed -n 2p "$T/o1")" "$(cat "$W/ids")" "as the worker's own uid, from LEASE_WORKER_IDS"
is "$(cat "$T/e1")" "" "with nothing on stderr (the workspace was saved)"
A=$(ls -d "$LIB"/snapshots/*/ | head -1); A=${A%/}
is "$(mode "$A")" "770 0:$K" "in its actor's directory: 0770 root:kaizen"
is "$(ls "$A" | grep -c '\.tar$')" 1 "one snapshot in it"
for _ in $(seq 1 100); do warm && break; sleep 0.1; done
op kz-run -q --actor ann --conversation c1 -- cat notes >"$T/o2" 2>"$T/e2"
is "$(cat "$T/o2")" kept "the next run gets the saved workspace back"
n=$(as $((B + 1)) "$K" kz-audit query --dir "$LIB/audit" --kind dispatch 2>/dev/null | wc -l)
is "$n" 4 "kz-audit recorded the operator's dispatches (two per run)"
t "the audit chain verifies" as $((B + 1)) "$K" env KZ_FIELD_KEY_FILE="$CRED/kz-audit/field.key" \
	kz-audit verify --dir "$LIB/audit"

# A room turn: kz-project admits, materializes into the worker's
# projection dir, and kz-run classifies the admitted files first.
PENV=(KZ_STORE_SOCKET="$STORE" KZ_PROJECT_BLOB_DIR="$LIB/blobs"
	KZ_FIELD_KEY_FILE="$CRED/kz-project/field.key")
pq() { as $((B + 2)) "$K,$STOREG" env "${PENV[@]}" kz-project "$@"; }
printf 'room text' >"$T/doc.txt" && chmod 644 "$T/doc.txt"
sha=$(pq blob-put --file "$T/doc.txt" | sed -n 's/.*"sha256":[[:space:]]*"\([0-9a-f]*\)".*/\1/p')
{ pq member-create --member ann && pq room-create --room r1 --member ann &&
	pq resource-create --resource d1 --member ann --kind document &&
	pq version-new --resource d1 --member ann --path doc.txt --blob "$sha" &&
	pq link --resource d1 --member ann --room r1 --turn t0 --shared; } >/dev/null
ok $? "kz-project (its user, in kz-store) fills the room through the store"
for _ in $(seq 1 100); do warm && break; sleep 0.1; done
op kz-run -q --room r1 --member ann -- cat /projection/files/doc.txt >"$T/o3" 2>"$T/e3"
is "$?" 0 "the operator's room turn runs"
is "$(cat "$T/o3")" "room text" "and the code reads the room's file"
is "$(cat "$T/e3")" "" "with nothing on stderr"
is "$(ls -A "$RUN" | grep -c kz-run-classify)" 0 "no classify copy is left"
# A declared output across the users: kz-run (the operator) takes the
# workspace archive over the worker's socket, and kz-project (its own
# user, in kaizen) reads the declared file where kz-run put it.
op kz-run --room r1 --member ann --output report.txt -- \
	sh -c 'printf REPORT >report.txt' >"$T/o6" 2>"$T/e6"
is "$?" 0 "the operator's room turn with a declared output runs"
like "$(cat "$T/e6")" "outputs linked 1 of 1: report.txt" \
	"kz-project, under its own uid, links the output"

# The daily collection (kz-project-collect.service, as its timer starts
# it): under kz-project's user, through the store and the audit sink, the
# room's blob stays and a blob no version names, two days old, goes.
sha2=$(printf 'abandoned' >"$T/ab.txt" && chmod 644 "$T/ab.txt" && pq blob-put --file "$T/ab.txt" |
	sed -n 's/.*"sha256":[[:space:]]*"\([0-9a-f]*\)".*/\1/p')
touch -d '2 days ago' "$LIB/blobs/$sha2" "$LIB/blobs/$sha"
FG=1 start kz-project-collect >"$T/collect.out" 2>"$T/collect.err"
is "$?:$(sed -n 's/.*"removed":[[:space:]]*\([0-9]*\).*/\1/p' "$T/collect.out")" "0:1" \
	"kz-project-collect.service, as its unit's user, removes the abandoned blob"
t "...and keeps the room's, however old" test -e "$LIB/blobs/$sha" -a ! -e "$LIB/blobs/$sha2"
n=$(as $((B + 1)) "$K" kz-audit query --dir "$LIB/audit" --kind projection 2>/dev/null | grep -c '"blob_collect"')
is "$n" 1 "...and kz-audit recorded it"

# kz-project reads a path a caller names with its own rights, which reach
# its own copy of the field key: it reads only what the caller owns.
pput() { op kz-msg "$PS" "{\"v\":1,\"op\":\"blob-put\",\"id\":\"x\",\"file\":\"$1\"}"; }
like "$(pput "$CRED/kz-project/field.key" 2>&1)" '"refused".*not the caller' \
	"blob-put of kz-project's field key, asked by a member of kaizen, is refused"
printf mine >"$T/op.txt" && chown $OPER "$T/op.txt"
like "$(pput "$T/op.txt" 2>&1)" '"ok": ?true.*"sha256"' "a file the caller owns is stored"
# Outside kaizen: refused by the file modes, with one line saying so.
out() { as $OUTS $OUTS env "${OPENV[@]}" "$@"; }
out kz-run --actor eve --conversation c9 -- true >"$T/o4" 2>"$T/e4"
is "$?" 3 "kz-run by a uid outside kaizen fails closed (exit 3)"
# It cannot look into the run dir, so it tries the flat layout's path.
like "$(cat "$T/e4")" "^kz-run: audit sink $RUN/kz-audit.sock unreachable \(.*Permission denied\); nothing was dispatched$" \
	"and says why on one line, naming the sink it tried"
for s in "$LS" "$AUD" "$PS" "$W/sock"; do
	out kz-msg "$s" '{"v":1,"op":"health","id":"x"}' >"$T/o5" 2>"$T/e5"
	rc=$?
	[ "$rc" != 0 ] && [ "$(wc -l <"$T/e5")" = 1 ] && grep -q "Permission denied" "$T/e5"
	ok $? "kz-msg outside kaizen to ${s#"$RUN"/} is refused on one line (exit $rc: $(head -c 100 "$T/e5"))"
done
tnot "the store refuses a member of kaizen (file modes)" as $OPER "$OPER,$K" \
	python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])" "$STORE"

# Past the file modes (CAP_DAC_OVERRIDE), the peer check refuses.
dac() { env -i PATH="$PATH" setpriv --reuid $OUTS --regid $OUTS --groups $OUTS \
	--inh-caps +dac_override --ambient-caps +dac_override "$@"; }
for s in "$LS" "$AUD" "$PS" "$W/sock"; do
	dac kz-msg "$s" '{"v":1,"op":"health","id":"x"}' >"$T/o6" 2>&1
	like "$(cat "$T/o6")" "unauthorized_peer|peer not allowed" \
		"past the modes, ${s#"$RUN"/} refuses a peer outside kaizen"
done
is "$(op kz-msg "$W/sock" '{"v":1,"op":"health","id":"x"}' | grep -c '"ok":true')" 1 \
	"the worker answers a member of kaizen (it has kz-lease's peers)"

done_testing

#!/bin/bash
# kz-project: admit + verify + materialize of 100 files of 64 KiB, against
# the physical floor of reading and hashing the same bytes: cp of the files
# followed by sha256sum of the copies.  Not a pass/fail test; target <= 1.5.
#
# Two paths are measured, in alternating rounds so that load drift on a
# shared machine weighs on all of them alike (medians of RUNS):
#   daemon    the product's dispatch path: one client process (built below)
#             connects to a running `kz-project serve`, sends admit, then
#             verify, then materialize on that one connection, as the
#             backend does before a run.  The daemon keeps its store
#             connection and the store's script cache.  This is the figure
#             the target is about.
#   one-shot  three cold `kz-project admit|verify|materialize` processes,
#             each connecting to the store: the operator/CI path, printed
#             for comparison.
# Both run every check: verify and materialize each re-read the stored
# snapshot and live state; materialize hashes every byte it writes and
# delivers nothing unless every path, size and SHA-256 matches.  Audit is
# off (KZ_AUDIT=off, the explicit opt-out), on both paths.
set -Eeu
# A step that fails stops the run: say which, not just stop (not in a
# cleanup that has turned set -e off, where a failure is expected).
trap 'r=$?; [[ $- == *e* ]] && echo "${0##*/}: stopped at line $LINENO (exit $r): $BASH_COMMAND" >&2' ERR
TOP=$(cd "$(dirname "$0")/../.." && pwd)
P=${KZ_PROJECT_BIN:-$TOP/bin/kz-project}	# another build to compare
RUNS=${RUNS:-11}
# BENCH_TMP=/dev/shm takes ext4 inode allocation (which slows down after
# many recent deletions, on both sides alike) out of the comparison.
T=$(mktemp -d "${BENCH_TMP:-/tmp}/kz-bench-project.XXXXXX")
srv=$(command -v valkey-server || command -v redis-server)
"$srv" --port 0 --unixsocket "$T/store.sock" --save '' --appendonly no \
	--daemonize no --loglevel warning >/dev/null & SPID=$!
DPID=
trap 'set +e; kill $SPID $DPID 2>/dev/null; wait 2>/dev/null; chmod -R u+w "$T"; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/store.sock" ] && break; sleep 0.05; done
export KZ_STORE_SOCKET=$T/store.sock KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/field.key \
	KZ_PROJECT_BLOB_DIR=$T/blobs
unset KZ_AUDIT_SOCKET KZ_CONFIG
export KZ_AUDIT=off
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"

# The client: admit, verify, materialize over one connection; exits 0 only
# when all three answered ok and materialize reports 100 files.
cat >"$T/client.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kz_frame.h"
#include "kz_json.h"
#include "kz_sock.h"
#define MAXF (16u << 20)
static cJSON *
call(int fd, cJSON *req)
{
	char why[200];
	cJSON *rep = NULL;

	if (kz_frame_write(fd, req, MAXF, 30000) != 0 ||
	    kz_frame_read(fd, MAXF, 30000, &rep, why, sizeof(why)) != 0 ||
	    !cJSON_IsTrue(cJSON_GetObjectItem(rep, "ok"))) {
		char *s = rep ? cJSON_PrintUnformatted(rep) : NULL;
		fprintf(stderr, "client: %s failed: %s\n", cJSON_GetStringValue(
		    cJSON_GetObjectItem(req, "op")), s ? s : "no reply");
		exit(1);
	}
	cJSON_Delete(req);
	return rep;
}
static cJSON *
req(const char *op)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddNumberToObject(r, "v", 1);
	cJSON_AddStringToObject(r, "id", op);
	cJSON_AddStringToObject(r, "op", op);
	return r;
}
int
main(int argc, char **argv)
{
	char why[200];
	cJSON *r, *rep, *snap;
	int fd;

	if (argc != 6 || kz_sock_connect(argv[1], 5000, &fd, why,
	    sizeof(why)) != 0)
		return 2;
	r = req("admit");
	cJSON_AddStringToObject(r, "room", argv[2]);
	cJSON_AddStringToObject(r, "member", argv[3]);
	cJSON_AddStringToObject(r, "turn", argv[4]);
	rep = call(fd, r);
	snap = cJSON_DetachItemFromObject(rep, "admission");
	cJSON_Delete(rep);
	r = req("verify");
	cJSON_AddItemToObject(r, "snapshot", cJSON_Duplicate(snap, 1));
	cJSON_Delete(call(fd, r));
	r = req("materialize");
	cJSON_AddItemToObject(r, "snapshot", snap);
	cJSON_AddStringToObject(r, "dest", argv[5]);
	rep = call(fd, r);
	if (cJSON_GetNumberValue(cJSON_GetObjectItem(rep, "files")) != 100)
		return 1;
	cJSON_Delete(rep);
	close(fd);
	return 0;
}
EOF
cc -std=c11 -D_GNU_SOURCE -O2 -I"$TOP/lib" $(pkg-config --cflags libcjson) \
	-o "$T/client" "$T/client.c" "$TOP/build/libkz.a" \
	$(pkg-config --libs libcjson libsodium)

mkdir -p "$T/src"
$P member-create --member bench >/dev/null
$P room-create --room bench --member bench >/dev/null
for i in $(seq -w 1 100); do
	head -c 65536 /dev/urandom >"$T/src/f$i.bin"
	sha=$($P blob-put --file "$T/src/f$i.bin" | sed -n 's/.*"sha256":[^"]*"\([0-9a-f]*\)".*/\1/p')
	$P resource-create --resource f$i --member bench >/dev/null
	$P version-new --resource f$i --member bench --path f$i.bin --blob "$sha" >/dev/null
	$P link --resource f$i --member bench --room bench --turn t0 --shared >/dev/null
done
(cd "$T/src" && sha256sum f*.bin >"$T/sums")

$P serve --socket "$T/kzp.sock" 2>"$T/serve.log" & DPID=$!
for _ in $(seq 100); do [ -S "$T/kzp.sock" ] && break; sleep 0.05; done
"$T/client" "$T/kzp.sock" bench bench warm "$T/pw" || { echo "daemon path failed" >&2; exit 1; }

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Nanoseconds a process has run on a CPU (the store, the daemon).
oncpu() { cut -d' ' -f1 "/proc/$1/schedstat"; }
check() { # check DIR: the projection is complete and byte-exact
	[ "$(ls "$1" | wc -l)" = 100 ] && (cd "$1" && sha256sum --quiet -c "$T/sums") ||
		{ echo "projection $1 incomplete or wrong" >&2; exit 1; }
}
daemon() { "$T/client" "$T/kzp.sock" bench bench "d$1" "$T/d$1"; }
oneshot() {
	$P admit --room bench --member bench --turn "t$1" >"$T/snap.json"
	$P verify --snapshot "$T/snap.json" >/dev/null
	$P materialize --snapshot "$T/snap.json" --dest "$T/p$1" >/dev/null
}
floor() { cp -r "$T/src" "$T/c$1"; (cd "$T/c$1" && sha256sum --quiet -c "$T/sums"); }
# measure FN ROUND: wall microseconds (taken inside the subshell, so no
# fork of the measurement is counted), and CPU microseconds spent by FN's
# processes (user + system, from the shell's `times`) plus the daemon's and
# the store's CPU over the same interval.  CPU time is what a loaded
# machine distorts least.
measure() {
	local c0 c1 t
	c0=$(( $(oncpu $SPID) + $(oncpu $DPID) ))
	t=$( (s=$EPOCHREALTIME; "$1" "$2" >/dev/null; e=$EPOCHREALTIME
		echo "$s $e"; times) | awk 'NR == 1 { w = ($2 - $1) * 1e6 }
		NR == 3 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/)
			c += a[1] * 60 + a[2] } }
		END { printf "%d %d\n", w, c * 1e6 }')
	c1=$(( $(oncpu $SPID) + $(oncpu $DPID) ))
	wall+=(${t% *})
	cpu+=($(( ${t#* } + (c1 - c0) / 1000 )))
}
wall=() cpu=()
for r in $(seq "$RUNS"); do
	for fn in daemon oneshot floor; do measure $fn "$r"; done
	check "$T/d$r"; check "$T/p$r"
	chmod -R u+w "$T/d$r" "$T/p$r"; rm -rf "$T/d$r" "$T/p$r" "$T/c$r"
done
# wall[] and cpu[] hold daemon, one-shot, floor for each round in turn.
pick() { local -n a=$1; for ((i = $2; i < ${#a[@]}; i += 3)); do echo "${a[i]}"; done | median; }
[ -n "${BENCH_STEPS:-}" ] && { s=$(now); $P admit --room bench --member bench --turn tx >"$T/snap.json"; a=$(now); $P verify --snapshot "$T/snap.json" >/dev/null; b=$(now); $P materialize --snapshot "$T/snap.json" --dest "$T/px" >/dev/null; c=$(now); echo "one-shot steps: admit $(( (a-s)/1000 )) verify $(( (b-a)/1000 )) materialize $(( (c-b)/1000 )) us"; }
dw=$(pick wall 0) ow=$(pick wall 1) fw=$(pick wall 2)
dc=$(pick cpu 0) oc=$(pick cpu 1) fc=$(pick cpu 2)
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "admit+verify+materialize, 100 x 64 KiB; medians of $RUNS; wall / CPU us:"
printf '  %-50s %8s / %8s\n' \
	"daemon (kz-project serve, one client connection)" "$dw" "$dc" \
	"one-shot (three kz-project processes)" "$ow" "$oc" \
	"floor: cp + sha256sum of the same files" "$fw" "$fc"
awk -v dw="$dw" -v ow="$ow" -v fw="$fw" -v dc="$dc" -v oc="$oc" -v fc="$fc" 'BEGIN {
	printf "ratio daemon/floor:   wall %.2f  CPU %.2f (target <= 1.5)\n", dw / fw, dc / fc
	printf "ratio one-shot/floor: wall %.2f  CPU %.2f\n", ow / fw, oc / fc }'

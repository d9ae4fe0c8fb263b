#!/bin/bash
# kz-project: admit + verify + materialize of 100 files of 64 KiB, against
# the physical floor of reading and hashing the same bytes: cp of the files
# followed by sha256sum of the copies.  Prints both (median of RUNS) and the
# ratio; the target is <= 1.5.  Not a pass/fail test.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
P=$TOP/bin/kz-project
RUNS=${RUNS:-11}
T=$(mktemp -d /tmp/kz-bench-project.XXXXXX)
srv=$(command -v valkey-server || command -v redis-server)
"$srv" --port 0 --unixsocket "$T/store.sock" --save '' --appendonly no \
	--daemonize no --loglevel warning >/dev/null & SPID=$!
trap 'kill $SPID 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/store.sock" ] && break; sleep 0.05; done
export KZ_STORE_SOCKET=$T/store.sock KZ_RUN_DIR=$T KZ_FIELD_KEY_FILE=$T/field.key \
	KZ_PROJECT_BLOB_DIR=$T/blobs
unset KZ_AUDIT_SOCKET KZ_CONFIG
head -c 32 /dev/urandom >"$T/field.key"; chmod 600 "$T/field.key"

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

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
kzp=() floor=()
for r in $(seq "$RUNS"); do
	s=$(now)
	$P admit --room bench --member bench --turn "t$r" >"$T/snap.json"
	$P verify --snapshot "$T/snap.json" >/dev/null
	$P materialize --snapshot "$T/snap.json" --dest "$T/p$r" >/dev/null
	e=$(now); kzp+=($(( (e - s) / 1000 )))
	s=$(now)
	cp -r "$T/src" "$T/c$r"
	(cd "$T/c$r" && sha256sum --quiet -c "$T/sums")
	e=$(now); floor+=($(( (e - s) / 1000 )))
	[ "$(ls "$T/p$r" | wc -l)" = 100 ] || { echo "projection incomplete" >&2; exit 1; }
	chmod -R u+w "$T/p$r"; rm -rf "$T/p$r" "$T/c$r"
done
[ -n "${BENCH_STEPS:-}" ] && { s=$(now); $P admit --room bench --member bench --turn tx >"$T/snap.json"; a=$(now); $P verify --snapshot "$T/snap.json" >/dev/null; b=$(now); $P materialize --snapshot "$T/snap.json" --dest "$T/px" >/dev/null; c=$(now); echo "admit $(( (a-s)/1000 )) verify $(( (b-a)/1000 )) materialize $(( (c-b)/1000 )) us"; }
k=$(printf '%s\n' "${kzp[@]}" | median)
f=$(printf '%s\n' "${floor[@]}" | median)
echo "kz-project admit+verify+materialize, 100 x 64 KiB: ${k} us (median of $RUNS)"
echo "cp + sha256sum of the same files:                  ${f} us (median of $RUNS)"
awk -v k="$k" -v f="$f" 'BEGIN { printf "ratio: %.2f (target <= 1.5)\n", k / f }'

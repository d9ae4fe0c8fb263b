#!/bin/sh
# Builds every libFuzzer harness here with clang (ASan and UBSan) and runs
# each for a bounded time: run.sh SECONDS [TARGET...] (SECONDS per target;
# no TARGET: all of them; FUZZ_JOBS of them at a time, 2 unless set).  Each starts from its seeds, tests/fuzz/seeds/
# TARGET/, one input a file, taken from the tests' own inputs and from
# crashes found before (kept as regression seeds).  A crash, a leak or a
# sanitizer report fails the run and leaves the reproducer in
# build/fuzz/TARGET/; the seeds are run first, so an old crash fails at once.
set -eu
secs=${1:-60}
[ $# -gt 0 ] && shift
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/fuzz
eg=cmd/kz-egress
# The config and framing modules go together: kz_parse_int (conf.c) reads
# files with kz_read_full (io.c), sock.c reads the config, json.c's
# envelope names the wire codes (wire.c).
cf="lib/conf.c lib/frame.c lib/io.c lib/sock.c lib/json.c lib/wire.c lib/err.c"
# target: the modules it links, each the real one (no stubs).
targets="
frame: $cf
http_head: $eg/http.c $eg/reason.c $cf
authority: $eg/http.c $eg/addr.c $eg/reason.c $cf
host: $eg/addr.c $eg/reason.c $cf
ip_diff: $eg/addr.c $eg/reason.c $cf
grant: $eg/grant.c $eg/reason.c lib/key.c lib/signed.c $cf
audit_schema: cmd/kz-audit/schema.c lib/key.c $cf
classify: lib/classify.c lib/err.c
path: lib/path.c lib/json.c lib/err.c
dns_answer: $eg/dns.c $eg/policy.c $eg/policy_check.c $eg/addr.c $eg/http.c $eg/grant.c $eg/reason.c lib/srv.c lib/key.c lib/signed.c lib/log.c $cf
"
want=${*:-$(printf '%s\n' "$targets" | sed -n 's/^\([a-z_0-9]*\):.*/\1/p')}
cflags="-g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer-no-link,address,undefined
	-fno-sanitize-recover=all -I$top/lib -I$top/$eg -I$top/cmd/kz-audit
	$(pkg-config --cflags libcjson libsodium libcares)"
# nettle: the HMAC-SHA1 of grant.c's TURN credentials.
# c-ares and libevent: dns.c's resolver (the harness calls only its judge).
# libmnl: policy_check.c's route lookup.
libs=$(pkg-config --libs libcjson libsodium nettle libcares libevent libmnl)
cd "$top"
for t in $want; do
	printf '%s\n' "$targets" | grep -q "^$t: " ||
		{ echo "fuzz: no target $t"; exit 2; }
done
srcs_of() { printf '%s\n' "$targets" | sed -n "s/^$1: //p"; }
obj() { echo "$out/obj/${1%.c}.o"; }

# Every module once, two compilers at a time, then one link per target.
mkdir -p "$out/obj"
for t in $want; do echo "tests/fuzz/fuzz_$t.c $(srcs_of "$t")"; done |
	tr ' ' '\n' | grep . | sort -u | while read -r c; do
		o=$(obj "$c")
		[ "$o" -nt "$c" ] && [ "$o" -nt tests/fuzz/run.sh ] &&
			! find lib "$eg" cmd/kz-audit -name '*.h' -newer "$o" |
			grep -q . && continue
		echo "$c $o"
	done | xargs -r -n 2 -P 2 sh -c \
	'mkdir -p "$(dirname "$2")" && exec clang $0 -c "$1" -o "$2"' \
	"$cflags" || { echo "fuzz: a module does not build"; exit 1; }
# One target: linked, then run from its seeds; what it says is in
# $d/report, and $d/failed when it failed.
one() {
	t=$1 d=$out/$1 objs=
	for c in tests/fuzz/fuzz_"$t".c $(srcs_of "$t"); do
		objs="$objs $(obj "$c")"
	done
	rm -rf "$d/corpus" "$d/failed"
	mkdir -p "$d/corpus"
	cp tests/fuzz/seeds/"$t"/* "$d/corpus/" 2>/dev/null || true
	# shellcheck disable=SC2086
	if ! clang -fsanitize=fuzzer,address,undefined $objs $libs \
		-o "$d/fuzz_$t" 2>"$d/report"; then
		echo "fuzz_$t: does not build" >>"$d/report"; : >"$d/failed"
	elif (cd "$d" && ./fuzz_"$t" -max_total_time="$secs" -max_len=4096 \
		-timeout=5 -artifact_prefix="$d/" "$d/corpus" 2>"$d/fuzz.log"); then
		echo "fuzz_$t: $(grep -E '^(#[0-9]+|Done)' "$d/fuzz.log" | tail -1)" >"$d/report"
	else
		{ tail -40 "$d/fuzz.log"; echo "fuzz_$t: FAILED (reproducer in $d/)"; } >"$d/report"
		: >"$d/failed"
	fi
}
# FUZZ_JOBS targets at a time (each libFuzzer run is one process), their
# reports in order once all are done.
jobs=${FUZZ_JOBS:-2} n=0
for t in $want; do
	mkdir -p "$out/$t"
	one "$t" &
	n=$((n + 1))
	[ "$n" -lt "$jobs" ] || { wait; n=0; }
done
wait
bad=
for t in $want; do
	cat "$out/$t/report"
	[ ! -e "$out/$t/failed" ] || bad="$bad $t"
done
[ -z "$bad" ] || { echo "fuzz: failed:$bad"; exit 1; }

#!/bin/sh
# Builds the frame+JSON harness with clang's libFuzzer (and ASan/UBSan) and
# runs it for a bounded time: run.sh SECONDS.  A crash, a leak or a sanitizer
# report fails the run and leaves the reproducer in build/fuzz/.
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/fuzz
mkdir -p "$out/corpus"
cp "$top"/tests/fuzz/seeds/* "$out/corpus/" 2>/dev/null || true
clang -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -I"$top/lib" $(pkg-config --cflags libcjson) \
	"$top/tests/fuzz/fuzz_frame.c" "$top/lib/frame.c" "$top/lib/json.c" \
	"$top/lib/err.c" "$top/lib/sock.c" "$top/lib/conf.c" \
	$(pkg-config --libs libcjson) -o "$out/fuzz_frame"
cd "$out"
./fuzz_frame -max_total_time="$secs" -max_len=4096 -timeout=5 \
	-artifact_prefix="$out/" "$out/corpus" 2>"$out/fuzz.log" || {
	tail -40 "$out/fuzz.log"; exit 1; }
tail -3 "$out/fuzz.log"

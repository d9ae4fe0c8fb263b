#!/usr/bin/env bash
# kz-browser benchmark (not a pass/fail test).  One run prints:
#  (a) session open -> first test page loaded, p50 and p99 over N opens,
#      through kz-browser: lease, grant, the worker's Chromium behind its
#      relay and kz-egress, navigation until the page stopped loading;
#  (b) the same page with playwright-core (tests/bench/browser/, installed
#      here by npm ci, never by make check) launching the same Debian
#      Chromium over its pipe on the host, no worker and no proxy;
#  (c) memory of one live session: the PSS of every process in its cgroup.
# Targets (issue 16): (a) p50 <= 0.7 x (b) p50; (c) <= 400 MiB.
# (a) and (c) are with SANDBOX_BROWSER_PRESTART=yes (a warm worker holds a
# Chromium started ahead of the session); (a) without it is printed
# beside them, from a first run of this script on a stack of its own.
# usage: tests/bench/browser.sh [N] (default 10), as root.
set -u
N=${1:-10}
if [ -z "${KZ_BENCH_KZ_ONLY:-}" ]; then
	OFF=$(SANDBOX_BROWSER_PRESTART=no KZ_BENCH_KZ_ONLY=1 bash "$0" "$N") ||
		{ echo "bench: the run without prestart failed: $OFF"; exit 3; }
	export SANDBOX_BROWSER_PRESTART=yes
fi
. "$(dirname "$0")/../e2e/lib.sh"
. "$TOP/tests/e2e/browser-lib.sh"
PW=$TOP/tests/bench/browser
[ -d "$PW/node_modules/playwright-core" ] ||
	(cd "$PW" && npm ci --no-audit --no-fund --ignore-scripts >/dev/null) ||
	{ echo "bench: npm ci failed in $PW"; exit 3; }

pct() { # pct P < numbers: the P-th percentile (nearest rank)
	sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int((p / 100) * NR + 0.999); if (i < 1) i = 1; printf "%.0f", v[i] }'
}

br_start 190 || { echo "bench: the stack did not start"; exit 3; }
O='http://origin.kz.test'
: >"$T/kzb.ms"
for i in $(seq 1 "$N"); do
	t0=$EPOCHREALTIME
	R=$(bcall open '{"actor":"bench","conversation":"b'$i'","url":"'$O'/"}')
	t1=$EPOCHREALTIME
	[ "$(jf "$R" page title)" = "kz test page" ] || { echo "bench: open failed: $R"; exit 3; }
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }' >>"$T/kzb.ms"
	if [ "$i" = 1 ]; then
		# (With prestart, its replacement starts 2 s after the op.)
		sleep 1
		[ "${SANDBOX_BROWSER_PRESTART:-no}" = yes ] && sleep 3
		# The session's cgroup is the one whose network namespace holds
		# the relay (a pre-started spare has none); the spare's is
		# the worker's, not the session's, and printed apart.
		PSS=0 SPARE=0
		for l in $(br_leaves | grep /memory/ || br_leaves | head -1); do
			pss=0 own=0
			for p in $(cat "$l/cgroup.procs"); do
				k=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null)
				pss=$((pss + ${k:-0}))
				awk 'NR > 1 && $4 == "0A" && $2 ~ /:0C38$/' "/proc/$p/net/tcp" 2>/dev/null | grep -q . && own=1
			done
			if [ $own = 1 ]; then PSS=$((PSS + pss / 1024)); else SPARE=$((SPARE + pss / 1024)); fi
		done
	fi
	bcall close '{"session":"'$(jf "$R" session)'"}' >/dev/null
	wait_for warm 1 100 >/dev/null
	# What a member would meet after a pause (KZ_BENCH_PAUSE seconds,
	# default 1): the reset's pre-start has had the moment a lease
	# usually leaves it.
	[ "${SANDBOX_BROWSER_PRESTART:-no}" = yes ] && sleep "${KZ_BENCH_PAUSE:-1}"
done
if [ -n "${KZ_BENCH_KZ_ONLY:-}" ]; then
	echo "p50 $(pct 50 <"$T/kzb.ms") ms, p99 $(pct 99 <"$T/kzb.ms") ms"
	exit 0
fi
node "$PW/pw.mjs" "$O/" origin.kz.test "$EG_ORIGIN" "$N" >"$T/pw.ms" 2>"$T/pw.err" ||
	{ echo "bench: playwright failed: $(head -3 "$T/pw.err")"; exit 3; }
K50=$(pct 50 <"$T/kzb.ms") K99=$(pct 99 <"$T/kzb.ms")
P50=$(pct 50 <"$T/pw.ms") P99=$(pct 99 <"$T/pw.ms")
echo "open -> first page loaded, $N runs:"
echo "  kz-browser (lease + worker Chromium + relay + kz-egress),"
echo "    SANDBOX_BROWSER_PRESTART=yes:                         p50 ${K50} ms, p99 ${K99} ms"
echo "    SANDBOX_BROWSER_PRESTART=no:                          $OFF"
echo "  playwright-core, same Chromium on the host, no proxy:   p50 ${P50} ms, p99 ${P99} ms"
awk -v a="$K50" -v b="$P50" 'BEGIN { printf "  ratio p50: %.2f (target <= 0.70)\n", a / b }'
echo "memory of one live session (PSS of its cgroup's processes): ${PSS} MiB (target <= 400)"
echo "  beside it, the worker's pre-started spare Chromium: ${SPARE} MiB (the two share pages, so each one's PSS is lower than alone; together $((PSS + SPARE)) MiB)"

#!/bin/bash
# kz-pkgrun leaves room on the state directory's filesystem: every copy
# into a projection (the package, the member files) takes its room first
# and is refused busy, before a byte is written, when the filesystem would
# be left with less than PKGRUN_STAGING_FREE_MIN.  The state directory here
# is a 32 MiB tmpfs of the test's own (like /run), the package 7 MiB: four
# slow invocations at once would fill it, three fit beside the 8 MiB the
# host keeps, the fourth is busy; with the others done it runs.
. "$(dirname "$0")/lib.sh"
plan 11
on_exit "for c in /sys/fs/cgroup/kz-pkgrun /sys/fs/cgroup/*/kz-pkgrun; do rmdir \$c 2>/dev/null; done"
. "$TOP/tests/e2e/pkgrun-lib.sh"
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(command -v python3)
cp -a "$TOP/tests/pkgrun/demo" "$T/big"
head -c $((7 << 20)) /dev/urandom >"$T/big/blob"
HB=$(kz-pkgrun admit "$T/big" "$TOP/tests/pkgrun/demo.json" 2>"$T/admit-big.err")
t "a 7 MiB package is admitted" test -n "$HB"
SMALL=$T/small
mkdir -p "$SMALL"
mount -t tmpfs -o size=32m,mode=0755 kz-t6207 "$SMALL" || bail "cannot mount a tmpfs"
on_exit "umount -l $SMALL"
export PKGRUN_STATE_DIR=$SMALL PKGRUN_WARM=0
avail_kib() { df -k --output=avail "$SMALL" | tail -1 | tr -d ' '; }
big() { kz-pkgrun invoke --package "$HB" --actor alice --conversation c1 "$@"; }

# One-shot: over the room it is refused busy, naming the setting, and
# writes nothing; with the room it runs.
out=$(PKGRUN_STAGING_FREE_MIN=28M big --tool echo --arg hi 2>&1); rc=$?
is "$rc" 1 "a package that would leave less than PKGRUN_STAGING_FREE_MIN is refused (exit 1)"
like "$out" "short of room.*PKGRUN_STAGING_FREE_MIN" "... in one line that names the setting"
is "$(ls "$SMALL" | grep -c '^inv-')" 0 "... and no projection is left"
is "$(PKGRUN_STAGING_FREE_MIN=1M big --tool echo --arg hi)" "echo: hi" "with room it runs"

# Member files take their room too: a 9 MiB file with 28 MiB kept.
mkdir -p "$T/ws/c1/alice/big"
head -c $((9 << 20)) /dev/urandom >"$T/ws/c1/alice/big/data"
out=$(PKGRUN_STAGING_FREE_MIN=28M PKGRUN_FILES_MAX=16M \
	pr --tool count --file big/data 2>&1); rc=$?
is "$rc" 1 "member files that would leave less than the room kept are refused (exit 1)"
like "$out" "short of room" "... short of room"

# The daemon: four slow invocations at once, 8 MiB kept.
S=$T/kz-pkgrun.sock
PKGRUN_STAGING_FREE_MIN=8M bg kz-pkgrun serve --socket "$S" 2>"$T/serve.log"
t "kz-pkgrun serves" wait_sock "$S"
HELD=
for i in 1 2 3 4; do
	( kz-msg -t 30 "$S" '{"op":"invoke","package":"'"$HB"'","actor":"a'$i'","conversation":"c1","tool":"shell","args":["sleep 4; echo done '$i'"]}' \
		>"$T/held$i" 2>&1 ) & HELD="$HELD $!"
	sleep 0.4
done
sleep 1
low=$(avail_kib)
ok "$([ "$low" -ge 8192 ]; echo $?)" "while they run the tmpfs keeps the 8 MiB (${low} KiB free)"
wait $HELD
n_busy=$(grep -l '"error":"busy"' "$T"/held? | wc -l)
n_done=$(grep -l '"result":"done' "$T"/held? | wc -l)
is "$n_busy $n_done" "1 3" "three ran, the fourth was busy"
r=$(kz-msg -t 30 "$S" '{"op":"invoke","package":"'"$HB"'","actor":"a5","conversation":"c1","tool":"echo","args":["again"]}')
like "$r" '"result":"echo: again' "once they are done the next one runs"
done_testing

#!/bin/bash
# kz-run with --room classifies the files kz-project admitted, the same way
# it classifies --file and inline scripts, before any worker is leased: a
# projected script that needs sudo is refused (exit 1, audited as an
# admission denial at the classify stage), whatever the command names;
# clean files run.  kz-project classifies the admitted blobs themselves
# (its classify op): no copy is made on disk for the check, and a blob
# whose bytes are not the admitted ones is refused.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
plan 27
. "$TOP/tests/e2e/room-run-lib.sh"
# Copies of the room's files anywhere in the run dir but the blob store.
staged() { find "$T" -path "$T/blobs" -prune -o -type f \( -name hello.sh \
	-o -name data.csv -o -name install.sh \) -print 2>/dev/null | wc -l; }
# The store's fencing-token counter: every lease and release moves it.
tokc() { redis-cli -s "$STORE_SOCK" GET 'kz:{default}:tok'; }

q member-create --member alice && q room-create --room r1 --member alice &&
	doc alice d1 tools/hello.sh 'echo "hello from the room"' &&
	doc alice d2 data.csv "a,b
1,2" &&
	q link --resource d1 --member alice --room r1 --turn t0 --shared &&
	q link --resource d2 --member alice --room r1 --turn t0 --shared
ok $? "a room with a clean script and a data file"

# Pass: clean files are classified and run.
l0=$(n_kind lease)
kz-run -q --room r1 --member alice -- sh /projection/files/tools/hello.sh >"$T/o1" 2>"$T/e1"
is "$?" 0 "a clean projected script runs"
is "$(cat "$T/o1")" "hello from the room" "with its output"
is "$(n_kind lease)" "$((l0 + 1))" "one worker was leased for it"
wait_for warm 1
is "$(staged)" 0 "no copy of the room's files is left (the reset wiped the projection)"

# A script that needs sudo, linked in a subdirectory of the room.
wait_for warm 1
doc alice d3 tools/setup/install.sh '#!/bin/sh
set -e
sudo apt-get install -y cowsay
echo installed' &&
	q link --resource d3 --member alice --room r1 --turn t1 --shared
ok $? "a script that needs sudo is linked to the room"
l0=$(n_kind lease) d0=$(n_kind dispatch) k0=$(tokc)
kz-run --room r1 --member alice -- sh /projection/files/tools/setup/install.sh >"$T/o2" 2>"$T/e2"
is "$?" 1 "running the projected sudo script is refused"
like "$(cat "$T/e2")" "kz-run: admission: host_administration: a projected file is host administration" \
	"stderr names host administration"
is "$(cat "$T/o2")" "" "nothing ran"
is "$(n_kind lease) $(n_kind dispatch)" "$l0 $d0" "no worker was leased, nothing dispatched"
is "$(tokc) $(st warm)" "$k0 1" "the pool issued no token: no lease was asked for"
den=$(audit_q --kind admission | grep '"decision":"denied"' | tail -1)
like "$den" '"stage":"classify"' "kz-run audited the denial at the classify stage"
like "$den" '"outcome":"host_administration"' "with the host_administration outcome"
unlike "$den" 'install.sh|tools/setup|sudo' "the record names no file and no content"
is "$(staged)" 0 "no copy was made for the check"

# The command does not have to name the file: what is projected is checked.
rc_is 1 "a run whose command ignores the sudo script is refused too" \
	kz-run --room r1 --member alice -- true
is "$(n_kind lease)" "$l0" "and nothing was leased"

# --select brings in the member's own file, not linked to the room: it is
# projected, and checked, as well.
q withdraw --resource d3 --member alice --room r1
doc alice d4 fix.py 'import os
if os.geteuid() != 0:
    raise SystemExit("must be run as root")'
rc_is 1 "a selected file with a root check is refused" \
	kz-run --room r1 --member alice --select d4 -- python3 /projection/files/fix.py
like "$(cat "$T/.out")" "admission: host_administration" "at the classify step"
is "$(n_kind lease)" "$l0" "and nothing was leased"

# The same member in another room, with only the clean script linked:
# refusals in r1 leave no mark, the run goes through.
q room-create --room r2 --member alice &&
	q link --resource d1 --member alice --room r2 --turn t0 --shared
kz-run -q --room r2 --member alice -- sh /projection/files/tools/hello.sh >"$T/o3" 2>"$T/e3"; r3=$?
is "$r3:$(cat "$T/o3")" "0:hello from the room" "a clean room runs"

# The blob behind the clean script is rewritten after it was admitted
# (same size): what would be classified is not what was admitted.
h=$(printf 'echo "hello from the room"' | sha256sum | cut -d' ' -f1)
chmod u+w "$T/blobs/$h" && printf 'sudo id; echo "hello from the x"' | head -c "$(stat -c %s "$T/blobs/$h")" >"$T/blobs/$h"
l0=$(n_kind lease)
rc_is 1 "a blob changed behind kz-project's back is refused" \
	kz-run --room r2 --member alice -- sh /projection/files/tools/hello.sh
like "$(cat "$T/.out")" "admission: refused: a file's bytes do not match the admitted digest" \
	"at the classify step, naming the digest"
is "$(n_kind lease)" "$l0" "and nothing was leased"
t "the audit chain verifies" kz-audit verify --dir "$T/audit"
done_testing

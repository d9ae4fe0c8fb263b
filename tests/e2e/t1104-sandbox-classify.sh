#!/bin/bash
# kz-sandbox classify: a script that requires root is host administration
# (exit 1 with that reason); others pass (exit 0).
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
plan 6
printf '#!/bin/sh\necho hello\n' >"$T/ok.sh"
printf '#!/bin/sh\nsudo systemctl restart x\n' >"$T/sudo.sh"
printf '#!/usr/bin/env python3\nimport os\nassert os.geteuid() == 0\n' >"$T/root.py"
printf 'echo "%%s" >> /etc/sudoers\n' >"$T/sudoers.sh"
rc_is 0 "an ordinary script passes" "$SB" classify "$T/ok.sh"
rc_is 1 "sudo is host administration" "$SB" classify "$T/sudo.sh"
rc_is 1 "an explicit root check is host administration" "$SB" classify "$T/root.py"
out=$("$SB" classify "$T/ok.sh" "$T/sudoers.sh" 2>&1); rc=$?
is "$rc" 1 "one refused file makes the whole call exit 1"
like "$out" "sudoers.sh: host_administration" "the refused file is named with the class"
rc_is 2 "an unreadable file is bad input" "$SB" classify "$T/missing"
done_testing

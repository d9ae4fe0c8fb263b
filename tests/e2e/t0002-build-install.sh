#!/bin/bash
# Every binary is hardened, answers --help and --version, and `make install`
# puts binaries, man pages, config and units where INSTALL says; the units
# it writes name the installed paths (PREFIX, DESTDIR staging, PREFIX=/usr
# with its config in /etc) and the store server that is installed, are
# Type=notify, and pass systemd-analyze verify where it exists.
. "$(dirname "$0")/lib.sh"
bins=$(cd "$TOP/cmd" && ls -d kz-* | sort)
n=$(echo "$bins" | wc -w)
plan $((n * 5 + 26))
for b in $bins; do
	f=$BIN/$b
	h=$(readelf -hd "$f" 2>/dev/null)
	like "$h" 'Type: +DYN' "$b is position independent"
	like "$h" 'BIND_NOW|FLAGS.*NOW' "$b is linked with -z now"
	like "$(readelf -lW "$f")" 'GNU_RELRO' "$b has a RELRO segment"
	"$f" --help >"$T/help" 2>&1; rc=$?
	is "$rc" 0 "$b --help exits 0"
	like "$("$f" --version 2>&1)" "^$b [0-9]+\.[0-9]+" "$b --version"
done
make -s -C "$TOP" install PREFIX="$T/p" >"$T/install.log" 2>&1
is "$?" 0 "make install succeeds"
ok "$([ -x "$T/p/bin/kz-msg" ] && [ -x "$T/p/bin/kz-supervise" ]; echo $?)" "binaries and kz-supervise installed"
ok "$([ -f "$T/p/share/man/man7/kz-protocol.7" ] && [ -f "$T/p/share/man/man5/kaizen.conf.5" ]; echo $?)" "man pages installed"
ok "$(ls "$T"/p/etc/kaizen/*.conf >/dev/null 2>&1; echo $?)" "sample config installed"
ok "$(ls "$T"/p/lib/systemd/system/*.service >/dev/null 2>&1; echo $?)" "systemd units installed"
L=$T/p/libexec/kaizen
ok "$([ -x "$L/kz-sandbox-tar" ] && [ -x "$L/kz-gvisor-loader" ] && [ -r "$L/kz-gvisor-compat.so" ]; echo $?)" \
	"kz-sandbox's archiver, gVisor loader and preload object installed beside each other"
like "$(readelf -lW "$L/kz-gvisor-loader")" 'GNU_RELRO' "the gVisor loader has a RELRO segment"
is "$(readelf -d "$L/kz-gvisor-loader" | grep -c NEEDED)" "0" "and is static (no shared library at each sandbox's boot)"
# A second install keeps an operator's edited config.
c=$(ls "$T"/p/etc/kaizen/*.conf | head -1)
echo "# edited" >>"$c"
make -s -C "$TOP" install PREFIX="$T/p" >/dev/null 2>&1
like "$(tail -1 "$c")" '^# edited$' "reinstall keeps edited config"

U=$T/p/lib/systemd/system
# cmds ROOT UNITDIR: every ExecStart/ExecStartPre command; those missing
# under ROOT printed as "missing PATH".
cmds() { sed -n 's/^ExecStart\(Pre\)\{0,1\}=//p' "$2"/*.service | awk '{print $1}' | sort -u; }
missing() { local c; for c in $(cmds "$1" "$2"); do [ -x "$1$c" ] || echo "missing $c"; done; }
is "$(ls "$U" | tr '\n' ' ')" "$(ls "$TOP/etc/systemd" | tr '\n' ' ')" "every unit is installed"
is "$(grep -l '@[A-Z_]*@' "$U"/* 2>/dev/null)" "" "no @PLACEHOLDER@ is left in an installed unit"
is "$(missing "" "$U")" "" "every command a unit runs exists where it says"
like "$(grep -h '^ExecStart=' "$U"/kz-audit.service)" "^ExecStart=$T/p/bin/kz-audit serve --config $T/p/etc/kaizen/kz-audit.conf\$" \
	"kz-audit.service runs the installed binary with the installed config"
want=$(command -v valkey-server || command -v redis-server)
like "$(grep -h '^ExecStart=' "$U"/kz-store.service)" "^ExecStart=$want .*--supervised systemd" \
	"kz-store.service runs the store server that is installed ($(basename "$want")), supervised by systemd"
# The daemons' units; kz-project-collect.service is a one-shot command.
D_UNITS=$(grep -L '^Type=oneshot$' "$U"/*.service)
is "$(grep -L '^Type=notify$' $D_UNITS)" "" "every daemon's unit is Type=notify"
is "$(grep -L '^NotifyAccess=main$' $D_UNITS)" "" "... and takes readiness from its main process only"
is "$(grep -l '^Type=oneshot$' "$U"/*.service | xargs -n1 basename)" "kz-project-collect.service" \
	"the one one-shot unit is blob-collect's"
is "$(sed -n 's/^Unit=//p' "$U"/kz-project-collect.timer)$(grep -c '^OnCalendar=' "$U"/kz-project-collect.timer)" "1" \
	"its timer starts it (its own name, by default) on a calendar"
if command -v systemd-analyze >/dev/null 2>&1; then
	out=$(systemd-analyze verify --man=no "$U"/*.service "$U"/*.timer 2>&1); rc=$?
	is "$rc:$out" "0:" "systemd-analyze verify accepts every installed unit"
else
	ok 0 "# SKIP systemd-analyze is not installed"
fi

# Staged for a package: DESTDIR, PREFIX=/opt/x.
make -s -C "$TOP" install DESTDIR="$T/d" PREFIX=/opt/x >"$T/install2.log" 2>&1
is "$?" 0 "make install DESTDIR=... PREFIX=/opt/x succeeds"
D=$T/d/opt/x/lib/systemd/system
is "$(missing "$T/d" "$D" | grep -v "missing $want\$")" "" "every kz command a staged unit runs is staged under DESTDIR"
like "$(grep -h '^ExecStart=' "$D"/kz-lease.service)" '^ExecStart=/opt/x/bin/kz-lease serve --config /opt/x/etc/kaizen/kz-lease.conf$' \
	"a staged unit names the final path, not DESTDIR"
is "$(grep -l '@[A-Z_]*@' "$D"/* 2>/dev/null)" "" "... with no placeholder left"

# PREFIX=/usr: binaries in /usr/bin, config in /etc/kaizen.
make -s -C "$TOP" install DESTDIR="$T/u" PREFIX=/usr >"$T/install3.log" 2>&1
is "$?" 0 "make install PREFIX=/usr succeeds"
ok "$(ls "$T"/u/etc/kaizen/kz-lease.conf "$T"/u/usr/lib/systemd/system/kz-lease.service >/dev/null 2>&1; echo $?)" \
	"PREFIX=/usr: config in /etc/kaizen, units in /usr/lib/systemd/system"
like "$(grep -h '^ExecStart=' "$T"/u/usr/lib/systemd/system/kz-project.service)" \
	'^ExecStart=/usr/bin/kz-project serve --config /etc/kaizen/kz-project.conf$' "... and the units say so"
done_testing

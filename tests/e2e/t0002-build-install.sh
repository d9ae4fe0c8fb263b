#!/bin/bash
# Every binary is hardened, answers --help and --version, and `make install`
# puts binaries, man pages, config and units where INSTALL says.
. "$(dirname "$0")/lib.sh"
bins=$(cd "$TOP/cmd" && ls -d kz-* | sort)
n=$(echo "$bins" | wc -w)
plan $((n * 5 + 6))
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
# A second install keeps an operator's edited config.
c=$(ls "$T"/p/etc/kaizen/*.conf | head -1)
echo "# edited" >>"$c"
make -s -C "$TOP" install PREFIX="$T/p" >/dev/null 2>&1
like "$(tail -1 "$c")" '^# edited$' "reinstall keeps edited config"
done_testing

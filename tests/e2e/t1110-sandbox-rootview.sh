#!/bin/bash
# The root view is an allowlist: host files outside it (under a fresh
# top-level directory, under /home) are invisible, /etc holds only what is
# synthesized or listed, /proc/cmdline is empty, and mountinfo names no host
# path, in a one-shot run and in a served worker laid out as kz-lease lays
# it out.  Masks and extra binds apply exactly or the sandbox refuses to
# start (exit 3) naming the path; a dedicated image root is exposed whole.
. "$(dirname "$0")/lib.sh"
SB=$BIN/kz-sandbox
C="python3 $TOP/tests/sandbox/client.py"
plan 53

TD=/kz-e2e-$$
mkdir -p "$TD/pub/sub" "$TD/run" /home/kz-e2e-$$
on_exit "rm -rf '$TD' /home/kz-e2e-$$"
chmod 0755 "$TD" "$TD/pub" "$TD/pub/sub"
echo "top-secret-$$" >"$TD/secret"
echo "home-secret-$$" >/home/kz-e2e-$$/secret
echo "pub-$$" >"$TD/pub/file"
ln -s sub "$TD/pub/link"
ln -s pub "$TD/publink"
mkdir -p "$T/proj" "$T/state"
echo "proj-$$" >"$T/proj/file"

sbx() { "$SB" run --state-dir "$T/state" --projection "$T/proj" --pids 64 \
	--workspace-size 2M --tmp-size 2M --shm-size 2M --timeout 20 "$@"; }
out() { sbx "$@" 2>&1; }

# What the host has of the allowlist, and what the view adds.
want=$(for d in bin lib lib32 lib64 libx32 sbin usr; do
	[ -e "/$d" ] || [ -L "/$d" ] && echo "$d"; done
	printf '%s\n' dev etc proc projection run sys tmp workspace)
is "$(out -- /bin/ls -A / | sort | tr '\n' ' ')" \
	"$(printf '%s\n' $want | sort | tr '\n' ' ')" \
	"/ holds only the allowlisted system directories and the view's own places"
is "$(sbx -- /bin/sh -c "cat $TD/secret; ls -A $TD; echo done" 2>/dev/null)" "done" \
	"a file under a fresh top-level directory is invisible"
is "$(sbx -- /bin/sh -c "cat /home/kz-e2e-$$/secret; ls -A /home /root /srv /var /opt; echo done" 2>/dev/null)" \
	"done" "a file under /home is invisible, and /home, /root, /srv, /var, /opt are absent"
# The configs of an install under the default prefix live in
# /usr/local/etc/kaizen, inside the /usr the view binds: that directory is
# hidden whole (the build's SYSCONFDIR, /usr/local/etc by default).
[ -d /usr/local/etc ] || { mkdir -p /usr/local/etc && on_exit "rmdir /usr/local/etc"; }
mkdir -p /usr/local/etc/kaizen-e2e-$$ && on_exit "rm -rf /usr/local/etc/kaizen-e2e-$$"
echo "conf-secret-$$" >/usr/local/etc/kaizen-e2e-$$/kz-egress.conf
chmod -R a+rX /usr/local/etc/kaizen-e2e-$$
is "$(sbx -- /bin/sh -c "cat /usr/local/etc/kaizen-e2e-$$/kz-egress.conf; ls -A /usr/local/etc; echo done" 2>/dev/null)" \
	"done" "the installed config directory (SYSCONFDIR, inside /usr) is empty in the view"
like "$(out -- /bin/ls -ld /usr/local/etc)" "^dr" "... a directory there, an empty read-only tmpfs"
like "$(out -- /bin/sh -c 'cat /projection/file')" "^proj-$$" "the projection is visible"
like "$(out -- /bin/sh -c '(: >/projection/x) 2>/dev/null || echo refused')" "refused" \
	"... and read-only"
etc_ok='^(alternatives|group|hostname|hosts|ld\.so\.cache|mime\.types|nsswitch\.conf|os-release|passwd|protocols|services|ssl)$'
is "$(out -- /bin/ls -A /etc | grep -Evc "$etc_ok")" 0 "/etc has only the listed files"
is "$(out -- /bin/ls -A /etc/ssl | tr '\n' ' ')" "certs openssl.cnf " \
	"/etc/ssl has only the certificates and openssl.cnf (no private/)"
unlike "$(out -- /bin/ls -A /etc)" "^(shadow|machine-id|resolv\.conf|kaizen|hostname~)$" \
	"no shadow, machine-id, resolv.conf or kz config from the host"
is "$(out -- /bin/cat /etc/passwd)" "sandbox:x:2100000000:2100000000:sandbox:/workspace:/bin/sh" \
	"passwd names only the sandbox's ids"
is "$(out --uid 20001 --gid 20002 -- /bin/sh -c 'cut -d: -f3,4 /etc/passwd; cut -d: -f3 /etc/group; id -un')" \
	"20001:20002
20002
sandbox" "passwd and group follow --uid and --gid, and the code's user has a name"
is "$(out -- /bin/sh -c 'cat /etc/hostname; hostname')" "sandbox
sandbox" "the hostname is neutral"
H=$(hostname)
case $H in localhost|sandbox|'') H=no-host-name-$$ ;; esac
unlike "$(out -- /bin/cat /etc/hosts)" "$H" "/etc/hosts does not name the host"
is "$(out -- /bin/sh -c 'wc -c </proc/cmdline')" 0 "/proc/cmdline is empty (the host's command line is hidden)"
like "$(out -- /bin/sh -c 'awk "BEGIN { print 40 + 2 }"; python3 -c "import ssl, os; print(os.path.exists(ssl.get_default_verify_paths().capath))"')" \
	"^42
True" "alternatives (awk) and the CA certificates resolve"

mi=$(out -- /bin/cat /proc/self/mountinfo)
unlike "$mi" "$T|kz-e2e|$TD|/state" "one-shot: mountinfo names neither the test dir, the state dir nor the projection's path"
like "$mi" " / /projection ro,.* - overlay overlay ro,lowerdir=projection:empty" \
	"... the projection is an overlay whose root is its own"

# Masks: a directory is hidden; a file, a link, a path the view lacks refuse.
is "$(out --mask /usr/share/doc -- /bin/ls -A /usr/share/doc | wc -l)" 0 \
	"a mask hides a directory of the view"
rc_is 3 "a mask naming a file refuses to start" sbx --mask /etc/passwd -- /bin/true
like "$(cat "$T/.out")" "mask /etc/passwd: not a directory" "... naming the path"
rc_is 3 "a mask crossing a symlink refuses to start" sbx --extra-ro "$TD/pub" \
	--mask "$TD/pub/link" -- /bin/true
like "$(cat "$T/.out")" "mask $TD/pub/link: crosses a symlink" "... naming the path"
rc_is 3 "a mask of a path the view does not have refuses to start" sbx --mask /home -- /bin/true
like "$(cat "$T/.out")" "mask /home: not in the root view" "... naming the path"
rc_is 2 "a mask of the sandbox's own /proc is a config error" sbx --mask /proc/1 -- /bin/true
if [ -L /bin ]; then
	rc_is 3 "a mask of the top-level link /bin refuses to start" sbx --mask /bin -- /bin/true
else
	ok 0 "# SKIP /bin is not a link here"
fi

# Extra read-only directories: exactly as configured, never the run dir.
r=$(KZ_RUN_DIR=$TD/run sbx --extra-ro "$TD/pub" -- /bin/sh -c \
	"cat $TD/pub/file; ls $TD; cat $TD/secret; : >$TD/pub/x && echo WROTE" 2>&1)
like "$r" "^pub-$$" "an extra directory is visible at its path"
unlike "$r" "top-secret|WROTE|^run$" "... read-only, and its siblings stay invisible"
rc_is 3 "an extra bind naming the run dir refuses to start" \
	env KZ_RUN_DIR="$TD/run" "$SB" run --state-dir "$T/state" --extra-ro "$TD/run" -- /bin/true
like "$(cat "$T/.out")" "extra bind $TD/run: is in the run directory" "... naming the path"
rc_is 3 "an extra bind holding the run dir refuses to start" \
	env KZ_RUN_DIR="$TD/run" "$SB" run --state-dir "$T/state" --extra-ro "$TD" -- /bin/true
like "$(cat "$T/.out")" "extra bind $TD: holds the run directory" "... naming the path"
rc_is 3 "an extra bind crossing a symlink refuses to start" sbx --extra-ro "$TD/publink" -- /bin/true
like "$(cat "$T/.out")" "extra bind $TD/publink: crosses a symlink" "... naming the path"
rc_is 3 "a missing extra directory refuses to start" sbx --extra-ro "$TD/none" -- /bin/true
rc_is 2 "an extra bind over the sandbox's /etc is a config error" sbx --extra-ro /etc/kaizen -- /bin/true

# A served worker laid out as kz-lease lays it out: its mountinfo names
# neither the run dir, the worker's directory nor its id, before and after
# a wipe, and the next lease's fresh overlay shows the projection as it is now.
RD=$T/rd
ID=rv$$w
W=$RD/workers/$ID
mkdir -p "$W/projection" "$W/state"
chmod 0755 "$RD" "$RD/workers" "$W"
chmod 1775 "$W/projection"
echo "lease-one-$$" >"$W/projection/one"
KZ_RUN_DIR=$RD bg "$SB" serve --id "$ID" --socket "$W/sock" --state-dir "$W/state" \
	--projection "$W/projection" --timeout 10
wait_sock "$W/sock" 10
b64() { python3 -c 'import json,sys,base64; r=json.load(sys.stdin); print(base64.b64decode(r.get("stdout_b64","")).decode(), end="")'; }
mi=$($C "$W/sock" run '{"argv":["/bin/cat","/proc/self/mountinfo"]}' | b64)
like "$mi" " /projection " "served: the projection is mounted"
unlike "$mi" "$T|$RD|$ID|workers|/state" "served: mountinfo names no run dir, worker directory, state dir or worker id"
is "$($C "$W/sock" run '{"argv":["/bin/sh","-c","cat /projection/one; cat /projection/two 2>/dev/null; true"]}' | b64)" \
	"lease-one-$$" "served: the first lease sees its projection"
rm -f "$W/projection/one"
echo "lease-two-$$" >"$W/projection/two"
like "$($C "$W/sock" wipe)" '"mounts_baseline": true' "the reset's fresh init and overlay keep the mount table's baseline"
is "$($C "$W/sock" run '{"argv":["/bin/sh","-c","cat /projection/one 2>/dev/null; cat /projection/two"]}' | b64)" \
	"lease-two-$$" "after the wipe nothing the last lease looked up survives: its file is gone, the new one shows"
unlike "$($C "$W/sock" run '{"argv":["/bin/cat","/proc/self/mountinfo"]}' | b64)" "$T|$ID" \
	"... and mountinfo still names no host path"
# What another sandbox or the host opens in the shared system directories
# or writes to /dev/null is not heard by an inotify watch in this one: each
# worker sees /usr, the /etc directories and the extra binds through
# overlays of its own, copies of the /etc files and device nodes of its
# own, never the host's inodes.  The watcher hears
# its own open (so the watches work) and nothing else.
cat >"$T/ino.py" <<'EOF'
import ctypes, os, select, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
for p in sys.argv[1:]:
    if libc.inotify_add_watch(fd, p.encode(), 0x1 | 0x2 | 0x20 | 0x10) < 0:
        print("nowatch", p)
print("watching", flush=True)
seen, end, own = set(), time.time() + 4, False
while time.time() < end or not own:
    if not own and time.time() >= end:
        open("/usr/bin/tac", "rb").close()
        own, end = True, time.time() + 0.5
    if not select.select([fd], [], [], 0.2)[0]:
        continue
    b, i = os.read(fd, 65536), 0
    while i < len(b):
        _, _, _, n = struct.unpack_from("iIII", b, i)
        seen.add(b[i + 16:i + 16 + n].rstrip(b"\0").decode() or "-")
        i += 16 + n
print("heard", " ".join(sorted(seen)) or "nothing")
EOF
cp "$T/ino.py" "$W/projection/ino.py"
$C "$W/sock" wipe >/dev/null
$C "$W/sock" run '{"argv":["/usr/bin/python3","/projection/ino.py","/usr/bin","/etc/ld.so.cache","/etc/ssl/certs","/dev/null"]}' \
	| b64 >"$T/ino.out" &
INO=$!
for i in $(seq 100); do grep -q watching "$T/ino.out" 2>/dev/null && break; sleep 0.05; done
sleep 0.5
/usr/bin/factor 7 >/dev/null; cat /etc/ld.so.cache >/dev/null; ls /etc/ssl/certs >/dev/null
sbx -- /bin/sh -c '/usr/bin/expr 1 + 1 >/dev/null; cat /etc/ld.so.cache >/dev/null; ls /etc/ssl/certs' >/dev/null 2>&1
wait "$INO"
is "$(cat "$T/ino.out")" "$(printf 'watching\nheard tac')" \
	"a watch in one sandbox hears its own open, and nothing the host or another sandbox opens in /usr/bin, /etc/ld.so.cache or /etc/ssl/certs or writes to /dev/null"
$C "$W/sock" shutdown >/dev/null
for i in $(seq 40); do [ -S "$W/sock" ] || break; sleep 0.05; done
is "$(grep -c -F "$T" /proc/self/mountinfo)" 0 "no mount is left on the host"

# A dedicated image root is exposed whole, without its /proc or /tmp; a mask
# through its top-level link (home -> var/home) refuses to start.
IMG=$TD/img
mkdir -p "$IMG/bin" "$IMG/data" "$IMG/etc" "$IMG/var/home" "$IMG/proc/x" "$IMG/tmp/x"
cat >"$T/show.c" <<'EOF'
#include <dirent.h>
#include <stdio.h>
int main(int argc, char **argv) {
	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]); struct dirent *e; FILE *f; int c;
		if (d) { while ((e = readdir(d))) if (e->d_name[0] != '.') printf("%s ", e->d_name); puts(""); closedir(d); }
		else if ((f = fopen(argv[i], "r"))) { while ((c = getc(f)) != EOF) putchar(c); fclose(f); }
		else printf("none %s\n", argv[i]);
	}
	return 0;
}
EOF
if cc -static -O1 -o "$IMG/bin/show" "$T/show.c" 2>/dev/null; then
	echo "image-$$" >"$IMG/data/x"
	echo "imghost" >"$IMG/etc/hostname"
	ln -s var/home "$IMG/home"
	chmod -R a+rX "$IMG"
	r=$(out --root "$IMG" -- /bin/show /data/x /etc/hostname /proc/x /tmp)
	like "$r" "^image-$$
imghost" "an image root is exposed whole, its own /etc included"
	like "$r" "none /proc/x" "... without its /proc or /tmp"
	rc_is 3 "a mask through the image's top-level link refuses to start" \
		sbx --root "$IMG" --mask /home -- /bin/show /
	like "$(cat "$T/.out")" "mask /home: crosses a symlink" "... naming the path"
else
	for i in 1 2 3 4; do ok 0 "# SKIP cannot build a static helper"; done
fi
# The image is every worker's: a watch on one of its top-level files, like
# one on its directories, hears only this sandbox's opens, not the host's
# or another sandbox's.  Such a file is the view's own copy, and one too
# big to copy refuses to start.
cat >"$T/ino.c" <<'EOF'
#include <poll.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char b[4096]; int fd = inotify_init1(0), n = 0; time_t end = time(0) + 3;
	for (int i = 1; i < argc; i++)
		if (inotify_add_watch(fd, argv[i], IN_ACCESS | IN_OPEN) < 0) printf("nowatch %s\n", argv[i]);
	printf("watching\n"); fflush(stdout);
	while (time(0) < end) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 200) > 0 && read(fd, b, sizeof(b)) > 0) n++;
	}
	printf("heard %d\n", n);
	return 0;
}
EOF
if cc -static -O1 -o "$IMG/bin/ino" "$T/ino.c" 2>/dev/null; then
	echo "top-$$" >"$IMG/topfile"
	chmod a+rx "$IMG/bin/ino"
	r=$(out --root "$IMG" -- /bin/show /topfile)
	is "$r" "top-$$" "an image's top-level file is shown"
	out --root "$IMG" -- /bin/ino /topfile /data >"$T/ino2.out" &
	INO=$!
	for i in $(seq 100); do grep -q watching "$T/ino2.out" 2>/dev/null && break; sleep 0.05; done
	for i in 1 2 3; do cat "$IMG/topfile" "$IMG/data/x" >/dev/null; sleep 0.2; done
	sbx --root "$IMG" -- /bin/show /topfile /data/x >/dev/null 2>&1
	wait "$INO"
	is "$(cat "$T/ino2.out")" "$(printf 'watching\nheard 0')" \
		"a watch on an image's top-level file or directory hears nothing the host or another sandbox opens"
	truncate -s 300K "$IMG/big"
	rc_is 3 "an image's top-level file too big to copy refuses to start" \
		sbx --root "$IMG" -- /bin/show /
	like "$(cat "$T/.out")" "root big: a top-level file over 256 KiB" "... naming it"
	rm -f "$IMG/big"
else
	for i in 1 2 3 4; do ok 0 "# SKIP cannot build a static helper"; done
fi
done_testing

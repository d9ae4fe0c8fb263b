#!/bin/bash
# The escape suite, the reset-leftovers suite and the main job end to end,
# run again with SANDBOX_RUNTIME=gvisor (every kz-sandbox they start, one-shot
# or a kz-lease worker, reads it from the environment), their TAP renumbered
# into one plan.  t4201 is not here: its workers are a stand-in, not
# kz-sandbox.  GVISOR_SUITES picks others.
#
# Three checks of t1102 read what Debian 12's runsc (20221219) does not show:
# the NoNewPrivs line of /proc/self/status, and nosuid and nodev in
# /proc/mounts; one (hidepid) reads /proc/1/environ, which gVisor lets
# the code read although pid 1, the loader, is another uid; and one of
# t4301 lists the workspace with ls, which fails there (gVisor refuses
# fstatat with AT_NO_AUTOMOUNT).  They are reported as TODO with that
# reason, and t1120 checks each property another way (no_new_privs with
# prctl, pid 1's environment holding no worker secret, the next tenant's
# workspace empty without ls).  Every other check must pass.
. "$(dirname "$0")/lib.sh"
[ -x /usr/bin/runsc ] || { echo "1..0 # SKIP runsc is not installed (make deps)"; exit 0; }
SUITES=${GVISOR_SUITES:-t1102-sandbox-escape t4202-reset-leftovers t4301-run-sandbox}
declare -A TODO=(
	["no capability in any set, no_new_privs set"]="gVisor 20221219 has no NoNewPrivs line in /proc/self/status"
	["setuid bit is ignored on the projection (nosuid)"]="gVisor 20221219 shows no nosuid in /proc/mounts"
	["the workspace is noexec-free but nodev and nosuid"]="gVisor 20221219 shows no nosuid,nodev in /proc/mounts"
	["the run's init is hidden (hidepid)"]="gVisor 20221219 lets the code read pid 1's environ (the code's own)"
	["another actor in the same conversation gets an empty workspace"]="ls fails under gVisor 20221219 (fstatat with AT_NO_AUTOMOUNT is EINVAL); t1120 checks the next tenant's workspace without ls"
)
# Each suite's plan is known only once it runs (t1102 counts its helper's
# attempts): the plan goes last, as TAP allows, the sum of theirs.
total=0 k=0
for s in $SUITES; do
	diag "$s under SANDBOX_RUNTIME=gvisor"
	start=$(date +%s) n=0 seen=0
	while IFS= read -r line; do
		case $line in
		"ok "* | "not ok "*)
			k=$((k + 1)) seen=$((seen + 1)) _n=$((_n + 1))
			st=${line%% [0-9]*}
			desc=${line#* [0-9]* - }
			if [ "$st" = "not ok" ] && [ -n "${TODO[$desc]+x}" ]; then
				echo "not ok $k - $s: $desc # TODO ${TODO[$desc]}"
			else
				[ "$st" = "ok" ] || _fail=$((_fail + 1))
				echo "$st $k - $s: $desc"
			fi
			;;
		"1.."*) n=${line#1..} ;;
		*) echo "$line" ;;
		esac
	done < <(SANDBOX_RUNTIME=gvisor bash "$TOP/tests/e2e/$s.sh" 2>&1)
	# A suite that stopped early leaves checks unreported: failures.
	while [ "$seen" -lt "$n" ]; do
		k=$((k + 1)) seen=$((seen + 1)) _n=$((_n + 1)) _fail=$((_fail + 1))
		echo "not ok $k - $s: check $seen was never reported"
	done
	[ "$n" -gt 0 ] || { k=$((k + 1)) _n=$((_n + 1)) _fail=$((_fail + 1)); echo "not ok $k - $s: no plan"; }
	diag "$s: $(($(date +%s) - start)) s"
done
plan "$k"
done_testing

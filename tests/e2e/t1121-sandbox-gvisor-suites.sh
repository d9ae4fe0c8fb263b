#!/bin/bash
# The escape suite, the reset-leftovers suite, the main job end to end,
# workspace snapshots (a save, then a restore after a wipe), the egress
# relay in front of a real kz-egress, Pi extension validation and package
# installs through the broker (real npm and pip in the sandbox), run
# again with SANDBOX_RUNTIME=gvisor (every kz-sandbox they start, one-shot
# or a kz-lease worker, reads it from the environment; kz-pi-validate
# starts kz-sandbox with an environment of its own, and reads its settings
# from KZ_PI_SANDBOX_CONFIG, here a file that names gvisor), their TAP
# renumbered into one plan.  Pi validation hands the loader its nonce and
# result descriptors, which reach it inside gVisor with the job.  t4201 is
# not here: its workers are a stand-in, not kz-sandbox.  GVISOR_SUITES
# picks others.
#
# Three checks of t1102 read what Debian 12's runsc (20221219) does not show:
# the NoNewPrivs line of /proc/self/status, and nosuid and nodev in
# /proc/mounts; and one (hidepid) reads /proc/1/environ, which gVisor lets
# the code read although pid 1, the loader, is another uid (the file is
# mode 0444 there, and making the loader undumpable changes nothing).
# They are reported as TODO with that reason, and t1120 checks each
# property another way (no_new_privs with prctl, pid 1's environment
# holding no worker secret).  One more (its count of /proc's pids) sees
# pid 1, the loader, for the same reason: ls -d, which once failed there
# (statx with AT_NO_AUTOMOUNT, before kz-gvisor-compat.so), counts it;
# t1120 checks that no host process is there.  Every other check must
# pass.
# e2e: alone (gVisor's CPU, and it runs seven other files again, their networks included)
. "$(dirname "$0")/lib.sh"
[ -x /usr/bin/runsc ] || { echo "1..0 # SKIP runsc is not installed (make deps)"; exit 0; }
SUITES=${GVISOR_SUITES:-t1102-sandbox-escape t4202-reset-leftovers t4301-run-sandbox t1105-sandbox-snapshot t2104-egress-sandbox t3102-pi-extension t6302-pkgbroker-sandbox}
printf 'SANDBOX_RUNTIME = gvisor\n' >"$T/pi-sandbox.conf"
# That file, as kz-pi-validate hands it over (--config), selects gVisor.
is "$(SANDBOX_STATE_DIR=$T/st "$BIN/kz-sandbox" run --config "$T/pi-sandbox.conf" -- /bin/uname -r 2>&1)" \
	"4.4.0" "KZ_PI_SANDBOX_CONFIG's file runs the code under gVisor"
k=1
declare -A TODO=(
	["no capability in any set, no_new_privs set"]="gVisor 20221219 has no NoNewPrivs line in /proc/self/status"
	["setuid bit is ignored on the projection (nosuid)"]="gVisor 20221219 shows no nosuid in /proc/mounts"
	["the workspace is noexec-free but nodev and nosuid"]="gVisor 20221219 shows no nosuid,nodev in /proc/mounts"
	["no host process is visible"]="gVisor 20221219 shows pid 1, the loader, in the code's /proc (no hidepid): one more pid than the native count allows"
	["the run's init is hidden (hidepid)"]="gVisor 20221219 makes /proc/PID/environ and maps mode 0444 whatever the owner (pid 1 is root there) or its dumpable flag; what pid 1, the loader, holds is a PATH only"
)
# Each suite's plan is known only once it runs (t1102 counts its helper's
# attempts): the plan goes last, as TAP allows, the sum of theirs.
total=0
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
		# A suite that skips itself (a tool it needs is missing) says
		# so as one skipped check, not as a broken plan.
		"1..0 # SKIP"*)
			n=1 seen=1 k=$((k + 1)) _n=$((_n + 1))
			echo "ok $k - $s # SKIP ${line#1..0 # SKIP }"
			;;
		"1.."*) n=${line#1..} ;;
		# A suite's bail-out ends that suite, not the whole run: its
		# unreported checks fail below.
		"Bail out!"*) diag "$s: ${line#Bail out! }" ;;
		*) echo "$line" ;;
		esac
	done < <(SANDBOX_RUNTIME=gvisor KZ_PI_SANDBOX_CONFIG=$T/pi-sandbox.conf \
		bash "$TOP/tests/e2e/$s.sh" 2>&1)
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

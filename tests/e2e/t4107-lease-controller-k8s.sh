#!/bin/bash
# The Kubernetes pieces a future controller would use (kz-controller(7)):
# the worker pod template keeps the worker's boundary (not root, every
# capability dropped, no privilege escalation, read-only root filesystem,
# RuntimeDefault seccomp, no service account token, resource limits, a
# bounded emptyDir workspace), and the RuntimeClass names gVisor.  Each
# property is read from the YAML itself, so a template edited to weaken
# one fails here.
. "$(dirname "$0")/lib.sh"
plan 14
K=$TOP/etc/k8s
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
# q FILE EXPR: EXPR over the document d (Python), printed.
q() { $PY -c "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(($2))" "$1"; }
P=$K/worker-pod.yaml
C="d['spec']['containers'][0]"
is "$(q "$P" "d['kind'], len(d['spec']['containers']), 'initContainers' in d['spec']")" "('Pod', 1, False)" \
	"the template is a pod of one container"
is "$(q "$P" "d['spec']['securityContext']['runAsNonRoot'], $C['securityContext']['runAsNonRoot']")" "(True, True)" \
	"it runs as non-root (pod and container)"
is "$(q "$P" "d['spec']['securityContext']['runAsUser'] not in (0, 65534)")" "True" "... under a uid that is neither root nor nobody"
is "$(q "$P" "$C['securityContext']['capabilities']")" "{'drop': ['ALL']}" "every capability is dropped, none added"
is "$(q "$P" "$C['securityContext']['allowPrivilegeEscalation'], $C['securityContext']['privileged']")" "(False, False)" \
	"no privilege escalation, not privileged"
is "$(q "$P" "$C['securityContext']['readOnlyRootFilesystem']")" "True" "the root filesystem is read-only"
is "$(q "$P" "sorted({d['spec']['securityContext']['seccompProfile']['type'], $C['securityContext']['seccompProfile']['type']})")" \
	"['RuntimeDefault']" "seccomp is the runtime's default filter"
is "$(q "$P" "d['spec']['automountServiceAccountToken']")" "False" "no service account token is mounted"
is "$(q "$P" "[d['spec'].get(k, False) for k in ('hostNetwork', 'hostPID', 'hostIPC')]")" "[False, False, False]" \
	"no host namespace"
is "$(q "$P" "sorted($C['resources']['limits'])")" "['cpu', 'ephemeral-storage', 'memory']" "cpu, memory and storage are limited"
is "$(q "$P" "[v['emptyDir'].get('sizeLimit') is not None for v in d['spec']['volumes']]")" "[True, True, True]" \
	"every volume is an emptyDir with a size limit (no hostPath)"
is "$(q "$P" "[m['mountPath'] for m in $C['volumeMounts'] if m.get('readOnly')]")" "['/projection']" "the projection is mounted read-only"
R=$K/runtimeclass-gvisor.yaml
is "$(q "$R" "d['kind'], d['handler']")" "('RuntimeClass', 'runsc')" "the RuntimeClass names gVisor's runsc"
like "$(mandoc -Tascii "$TOP/man/man7/kz-controller.7" | sed "s/.\x08//g")" "No Kubernetes controller exists yet" \
	"kz-controller(7) says no Kubernetes controller exists yet"
done_testing

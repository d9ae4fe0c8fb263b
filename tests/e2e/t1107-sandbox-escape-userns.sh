#!/bin/bash
# The escape suite of t1102 again, with the code in its own user namespace
# (SANDBOX_USERNS=on, the sandbox ids mapped to an unprivileged host id).
unshare --user true 2>/dev/null ||
	{ echo "1..0 # SKIP this environment refuses user namespaces (chroot?)"; exit 0; }
SANDBOX_USERNS=on SANDBOX_USERNS_HOST_UID=$((200000 + $$ % 50000)) \
	SANDBOX_USERNS_HOST_GID=$((200000 + $$ % 50000)) \
	exec bash "$(dirname "$0")/t1102-sandbox-escape.sh"

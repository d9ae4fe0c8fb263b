#!/bin/sh
# A worker for controller fault tests (t4104): the mode in
# $KZ_RUN_DIR/worker-mode says what the next started worker does:
#   hang  never opens its socket (a create whose outcome stays unknown)
#   die   exits at once (a create whose process died)
#   good  the pool-level stand-in worker
case $1 in reap | files) exec python3 "$(dirname "$0")/standin-worker.py" "$@" ;; esac
mode=$(cat "$KZ_RUN_DIR/worker-mode" 2>/dev/null || echo good)
case $mode in
die) exit 1 ;;
hang) while :; do sleep 0.2; done ;;
*) exec python3 "$(dirname "$0")/standin-worker.py" "$@" ;;
esac

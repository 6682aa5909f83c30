#!/usr/bin/env bash
# Stop the standalone cluster that bin/start-standalone.sh started: each daemon's process
# group (by the PIDs it recorded), SIGTERM first, SIGKILL after 10 s; then remove its state.
set -uo pipefail
source "$(dirname "$0")/_common.sh"

own_state_dir
if [ ! -d "$STATE_DIR" ]; then
    echo "no standalone cluster state in $STATE_DIR: nothing to stop"
    exit 0
fi
pids=()
for f in "$STATE_DIR"/worker*.pid "$STATE_DIR"/master.pid; do   # workers first
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    if alive "$pid"; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
        pids+=("$pid")
    fi
done
for _ in $(seq 40); do
    left=0
    for pid in "${pids[@]}"; do alive "$pid" && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.25
done
for pid in "${pids[@]}"; do
    if alive "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; fi
    # the group may outlive its leader (an executor still exiting): stop it too
    kill -KILL -- "-$pid" 2>/dev/null || true
done
rm -rf "$STATE_DIR"
echo "stopped ${#pids[@]} daemon(s)"

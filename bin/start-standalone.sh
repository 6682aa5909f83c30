#!/usr/bin/env bash
# Start a Spark standalone cluster on this machine: one master and N workers, bound to
# loopback, from the pip-installed pyspark. Stop it with bin/stop-standalone.sh.
#
#   bin/start-standalone.sh [--workers N] [--cores C] [--memory M]   (default 2 x 1 core, 2g)
#
# Prints the master URL (also in $SPARKTF_STANDALONE_DIR/master-url, default
# /tmp/sparktf-standalone-$UID). Logs and PID files are kept in that directory.
set -euo pipefail
source "$(dirname "$0")/_common.sh"

WORKERS=2 CORES=1 MEMORY=2g
while [ $# -gt 0 ]; do
    case "$1" in
        --workers) WORKERS="$2"; shift 2 ;;
        --cores) CORES="$2"; shift 2 ;;
        --memory) MEMORY="$2"; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "start-standalone.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$WORKERS$CORES" in *[!0-9]*|"") echo "--workers and --cores take positive integers" >&2; exit 2 ;; esac
[ "$WORKERS" -ge 1 ] && [ "$CORES" -ge 1 ] || { echo "--workers and --cores must be >= 1" >&2; exit 2; }

own_state_dir
if [ -f "$STATE_DIR/master.pid" ] && alive "$(cat "$STATE_DIR/master.pid")"; then
    echo "a standalone cluster is already running ($(cat "$STATE_DIR/master-url" 2>/dev/null));" \
         "stop it first: bin/stop-standalone.sh" >&2
    exit 1
fi
rm -rf "$STATE_DIR"
(umask 077 && mkdir -p "$STATE_DIR/work")   # the daemons' logs and pids: this user's alone
own_state_dir

# Each daemon gets a session of its own (setsid), so stop-standalone.sh can stop it and
# every process it started (executors, Python workers) by its PID's process group.
daemon() {  # daemon NAME CLASS ARGS...
    local name="$1"; shift
    SPARK_WORKER_DIR="$STATE_DIR/work" setsid "$SPARK_HOME/bin/spark-class" "$@" \
        > "$STATE_DIR/$name.log" 2>&1 < /dev/null &
    echo $! > "$STATE_DIR/$name.pid"
}

fail() {
    echo "start-standalone.sh: $1; logs in $STATE_DIR" >&2
    tail -n 20 "$STATE_DIR"/*.log >&2 || true
    "$(dirname "$0")/stop-standalone.sh" > /dev/null 2>&1 || true
    exit 1
}

PORT="$(free_port)"
daemon master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$PORT" \
    --webui-port "$(free_port)"
for _ in $(seq 120); do listening 127.0.0.1 "$PORT" && break; sleep 0.5; done
listening 127.0.0.1 "$PORT" || fail "the master did not listen on 127.0.0.1:$PORT within 60 s"
URL="spark://127.0.0.1:$PORT"

for i in $(seq "$WORKERS"); do
    daemon "worker$i" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores "$CORES" \
        --memory "$MEMORY" --webui-port "$(free_port)" "$URL"
done
for _ in $(seq 120); do
    [ "$(grep -c 'Registering worker' "$STATE_DIR/master.log" || true)" -ge "$WORKERS" ] && break
    sleep 0.5
done
[ "$(grep -c 'Registering worker' "$STATE_DIR/master.log" || true)" -ge "$WORKERS" ] \
    || fail "not every worker registered with the master within 60 s"

echo "$URL" > "$STATE_DIR/master-url"
echo "$((WORKERS * CORES))" > "$STATE_DIR/cores"
echo "$URL"

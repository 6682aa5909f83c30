#!/usr/bin/env bash
# Run an example (or any PySpark script) with spark-submit on loopback, against the standalone
# cluster that bin/start-standalone.sh started if one is running, else on local[*]; with
# conf/standalone or conf/local as SPARK_CONF_DIR (Spark settings + a quiet log4j2 config).
#
#   bin/run-example.sh examples/mnist.py --epochs 4
set -euo pipefail
source "$(dirname "$0")/_common.sh"

[ $# -ge 1 ] || { sed -n '2,7p' "$0"; exit 2; }
args=()
own_state_dir
if [ -f "$STATE_DIR/master-url" ] && alive "$(cat "$STATE_DIR/master.pid" 2>/dev/null)"; then
    export SPARK_CONF_DIR="${SPARK_CONF_DIR:-$SPARKTF_ROOT/conf/standalone}"
    args+=(--master "$(cat "$STATE_DIR/master-url")" --conf "spark.cores.max=$(cat "$STATE_DIR/cores")")
else
    export SPARK_CONF_DIR="${SPARK_CONF_DIR:-$SPARKTF_ROOT/conf/local}"
fi
exec "$SPARK_HOME/bin/spark-submit" "${args[@]}" "$@"

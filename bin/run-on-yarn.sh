#!/usr/bin/env bash
# Run an example (or any PySpark script) with spark-submit on the loopback YARN that
# bin/yarn-test-cluster.sh started, in client mode, with the settings docs/yarn.md explains
# (Spark's jars and this Python taken from this machine, which the NodeManager shares; two
# executors of 1 GB + 2 GB overhead: the TF process lives in the executor's container).
#
#   bin/yarn-test-cluster.sh start && bin/run-on-yarn.sh examples/mnist.py
#   bin/run-on-yarn.sh --deploy-mode cluster --py-files examples/mnist_data.py examples/mnist.py ...
set -euo pipefail
source "$(dirname "$0")/_common.sh"

[ $# -ge 1 ] || { sed -n '2,8p' "$0"; exit 2; }
# The cluster's client configuration decides where jobs and their secrets go: use it only if
# nobody else can have written it (a directory in /tmp can be planted by another user).
if [ -n "${HADOOP_CONF_DIR:-}" ]; then
    [ -d "$HADOOP_CONF_DIR" ] && own_dir "$(readlink -f "$HADOOP_CONF_DIR")" yes \
        "Use a Hadoop conf directory that only you (or root) can write."
else
    YARN_DIR="${SPARKTF_YARN_DIR:-/tmp/sparktf-yarn-$(id -u)}"
    export HADOOP_CONF_DIR="$YARN_DIR/conf"
    AGAIN="Remove it (if it is not yours, ask its owner or an administrator), then run bin/yarn-test-cluster.sh start again, or set SPARKTF_YARN_DIR to a directory of your own."
    for dir in "$YARN_DIR" "$HADOOP_CONF_DIR"; do
        { [ -e "$dir" ] || [ -L "$dir" ]; } && own_dir "$dir" no "$AGAIN"
    done
fi
if [ ! -f "$HADOOP_CONF_DIR/yarn-site.xml" ]; then
    echo "no YARN configuration in $HADOOP_CONF_DIR: run bin/yarn-test-cluster.sh start first" >&2
    exit 2
fi
export SPARK_CONF_DIR="${SPARK_CONF_DIR:-$SPARKTF_ROOT/conf/yarn-loopback}"
exec "$SPARK_HOME/bin/spark-submit" --master yarn \
    --conf "spark.yarn.jars=local:$SPARK_HOME/jars/*" \
    --conf "spark.pyspark.python=$PYTHON" \
    "$@"

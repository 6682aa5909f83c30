# Shared by the bin/ scripts (sourced, not run).
# The pip-installed pyspark is a complete Spark: SPARK_HOME is its package directory.
PYTHON="${PYSPARK_PYTHON:-$(command -v python3)}"
export PYSPARK_PYTHON="$PYTHON"
export SPARK_HOME="${SPARK_HOME:-$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"   # loopback only, unless you say otherwise
SPARKTF_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${SPARKTF_STANDALONE_DIR:-${TMPDIR:-/tmp}/sparktf-standalone-$(id -u)}"

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

listening() {  # listening HOST PORT
    "$PYTHON" -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()' "$1" "$2" 2>/dev/null
}

alive() {  # alive PID
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null
}

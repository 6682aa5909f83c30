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

own_dir() {  # own_dir DIR ALSO_ROOT HINT: refuse (exit 2) a DIR another user could have written
    # DIR must not be a symlink, must be owned by this user (or root, with ALSO_ROOT=yes) and
    # writable by nobody else; HINT says what to do instead.
    local dir="$1" owner mode
    if [ -L "$dir" ]; then
        echo "$(basename "$0"): $dir is a symlink (to $(readlink "$dir")); not used. $3" >&2
        exit 2
    fi
    owner="$(stat -c %u "$dir")" mode="$(stat -c %a "$dir")"
    if [ "$owner" != "$(id -u)" ] && ! { [ "$2" = yes ] && [ "$owner" = 0 ]; }; then
        echo "$(basename "$0"): $dir is owned by uid $owner, not by you (uid $(id -u)); not used. $3" >&2
        exit 2
    fi
    if [ $((8#$mode & 8#022)) -ne 0 ]; then
        echo "$(basename "$0"): $dir is writable by other users (mode $mode); not used. $3" >&2
        exit 2
    fi
}

own_state_dir() {  # refuse a standalone state directory ($STATE_DIR) another user could plant:
    # its pid files say what stop-standalone.sh kills, its master-url where jobs are sent
    if [ -e "$STATE_DIR" ] || [ -L "$STATE_DIR" ]; then
        own_dir "$STATE_DIR" no "Remove it (if it is not yours, ask its owner or an administrator), or set SPARKTF_STANDALONE_DIR to a directory of your own."
    fi
}

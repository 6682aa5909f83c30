#!/usr/bin/env bash
# The version matrix (docs/compatibility.md): one cached venv per cell of PySpark x
# TensorFlow/tf-keras x pyarrow, each running `spark-submit examples/mnist.py` and the unit
# tier against this checkout; prints a Markdown table. Cells run one at a time.
#
#   bin/compat-matrix.sh --list              # the cells and their pins
#   bin/compat-matrix.sh                     # every cell (venvs under ~/.cache/sparktf/compat)
#   bin/compat-matrix.sh newest pyspark-3.5  # some cells
#   bin/compat-matrix.sh --table             # the saved results as a table
set -euo pipefail
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"   # loopback only
exec python3 "$(dirname "$0")/compat_matrix.py" "$@"

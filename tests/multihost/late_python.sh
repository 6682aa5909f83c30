#!/bin/sh
# spark.pyspark.python of test_network_faults.py's rendezvous test: the first executor Python
# to start (Spark's Python daemon, started for the gang's barrier task, the application's first
# Python task) waits $SPARKTF_TEST_LATE_SECS seconds, so that the other task reaches the
# rendezvous first and waits there for every node's address. Each writes its host's address
# into $SPARKTF_TEST_LATE_DIR: late.host (mkdir decides who is first) or early.<pid>.
dir="$SPARKTF_TEST_LATE_DIR"
me="$(hostname -I | cut -d' ' -f1)"
if mkdir "$dir/late" 2>/dev/null; then
    echo "$me" > "$dir/late/host"
    sleep "$SPARKTF_TEST_LATE_SECS"
else
    echo "$me" > "$dir/early.$$"
fi
exec "$SPARKTF_TEST_PYTHON" "$@"

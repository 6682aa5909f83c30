#!/usr/bin/env bash
# A real HDFS (Apache Hadoop 3.5.0 NameNode + DataNode, WebHDFS on) on loopback, for tests,
# benchmarks and trials; YARN is not part of it. Nothing is installed: what it needs is fetched
# from Maven Central (bin/hadoop/pom.xml) once and cached.
#
#   eval "$(bin/hdfs-test-cluster.sh start)"   # exports SPARKTF_TEST_HDFS=hdfs://127.0.0.1:PORT, ...
#   bin/hdfs-test-cluster.sh status|env|stop
#
# More: bin/hdfs_test_cluster.py's docstring.
set -euo pipefail
exec python3 "$(dirname "$0")/hdfs_test_cluster.py" "$@"

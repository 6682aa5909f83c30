#!/usr/bin/env bash
# A real YARN on loopback: Apache Hadoop 3.5.0 ResourceManager + NodeManager, with a NameNode
# and DataNode, each a plain `java -cp ...` daemon, for tests, trials and docs/yarn.md. The
# jars come from Maven Central (bin/hadoop/pom.xml) once and are cached.
#
#   bin/yarn-test-cluster.sh start     # prints the ResourceManager's address, then, last:
#                                      # HADOOP_CONF_DIR=DIR   (export "$(... start | tail -1)")
#   bin/yarn-test-cluster.sh status|stop
#   bin/yarn-test-cluster.sh yarn logs -applicationId ID    # Hadoop's yarn CLI
#   bin/yarn-test-cluster.sh hdfs dfs -ls /                 # Hadoop's hdfs dfs
#   bin/yarn-test-cluster.sh start --kerberos  # an MIT KDC and secure HDFS and YARN; also
#                                              # prints KRB5_CONFIG=, PRINCIPAL=, KEYTAB=
#   bin/yarn-test-cluster.sh start --hosts 3   # (root) a master + 3 worker hosts, each a
#                                              # network namespace with its own address
#   bin/yarn-test-cluster.sh partition|heal|crash HOST   # faults on one worker host
#   bin/yarn-test-cluster.sh firewall HOST LO-HI|off     # nftables in the host
#   bin/yarn-test-cluster.sh cut HOST OTHER|off          # HOST and OTHER cannot talk
#
# More: bin/yarn_test_cluster.py's docstring.
set -euo pipefail
exec python3 "$(dirname "$0")/yarn_test_cluster.py" "$@"

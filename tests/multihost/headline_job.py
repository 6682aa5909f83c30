"""The mission's call across hosts, spark-submitted by test_multihost_jobs.py to the multi-host test YARN
(client mode: this driver on the edge node): ``sparktf.run(sc, main_fn, num_ps=2)``, where
main_fn is tests/helpers' MWMS job plus what the node saw of the network: its TF_CONFIG, its
own host's address and the sparktf it imported; then, in the same session,
``cluster.inference`` over an RDD on two nodes of those hosts. Prints ``RESULTS=<json>`` last.
"""

import json
import os
import sys

import cloudpickle
import helpers
from helpers.tf_jobs import mwms_keras

cloudpickle.register_pickle_by_value(helpers)


def own_address(master):
    """This host's address on the bridge: the source address of a route to the master."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((master, 9))  # (UDP: nothing is sent)
        return s.getsockname()[0]


def main_fn(args, ctx):
    import sparktf

    result = mwms_keras(args, ctx)
    result.update(
        tf_config=os.environ.get("TF_CONFIG"),
        address=own_address(args["master"]),
        sparktf=sparktf.__file__,
        container=os.environ.get("CONTAINER_ID"),
    )
    return result


if __name__ == "__main__":
    from pyspark import SparkContext

    import sparktf

    sc = SparkContext(appName="sparktf-multihost-headline")
    cluster = sparktf.run(sc, main_fn, {"master": sys.argv[1]}, num_ps=2)
    cluster.shutdown(timeout=300)
    results = {name: cluster.results.get(name) for name in cluster.results}
    roles = [r.name for r in cluster.roles]
    # a second call in the same session: cluster.inference across the hosts (InputMode.SPARK;
    # each row goes to a node, possibly on another host, and its output comes back in order)
    from helpers.feed_jobs import infer_double

    rdd = sc.parallelize(range(2000), 5)
    scorer = sparktf.run(sc, infer_double, {}, num_executors=2, input_mode=sparktf.InputMode.SPARK)
    scored = scorer.inference(rdd)
    inference = {
        "first": scored.take(3),
        "count": scored.count(),
        "pairs_ok": scored.zip(rdd).filter(lambda p: p[0] != 2 * p[1]).count() == 0,
        "returned": scorer.shutdown(),
    }
    sc.stop()
    print("RESULTS=" + json.dumps({"roles": roles, "results": results, "inference": inference}))

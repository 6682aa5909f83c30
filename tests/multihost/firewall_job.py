"""A small MWMS job across the multi-host test YARN for test_network_faults.py's firewall rows:
``sparktf.run(sc, mwms_keras, num_executors=2)`` with whatever ``spark.sparktf.portRange`` the
submit gives. Prints ``RESULT=<json>`` last: the nodes' results, or the error's type, message
and how long the call took."""

import json
import time

import cloudpickle
import helpers
from helpers.tf_jobs import mwms_keras

cloudpickle.register_pickle_by_value(helpers)

if __name__ == "__main__":
    from pyspark import SparkContext

    import sparktf

    sc = SparkContext(appName="sparktf-multihost-firewall")
    start = time.monotonic()
    try:
        cluster = sparktf.run(sc, mwms_keras, {}, num_executors=2)
        cluster.shutdown(timeout=300)
        result = {"ok": True, "loss": cluster.results["chief:0"]["loss"]}
    except sparktf.SparkTFError as exc:
        result = {"ok": False, "type": type(exc).__name__, "message": str(exc)}
    result["secs"] = time.monotonic() - start
    sc.stop()
    print("RESULT=" + json.dumps(result))

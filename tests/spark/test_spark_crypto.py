"""A sparktf job runs with what the YARN templates turn on (conf/yarn*/spark-defaults.conf):
Spark's RPC authenticated (spark.authenticate) and encrypted (spark.network.crypto.enabled),
which carries sparktf's per-job secret inside the task closures. Real Spark in local-cluster
mode (separate executor JVMs: the closures cross Spark's RPC); standalone-style, the shared
secret is given (YARN makes one per application)."""

import secrets

import pytest
from helpers import feed_jobs

import sparktf
from sparktf import InputMode

pytestmark = pytest.mark.usefixtures("no_leaks")

CRYPTO = (
    ("spark.authenticate", "true"),
    ("spark.authenticate.secret", secrets.token_hex(16)),
    ("spark.network.crypto.enabled", "true"),
)


@pytest.fixture(scope="module")
def sc_crypto(spark_pool):
    return spark_pool.get("local-cluster[2,1,1024]", CRYPTO)


def test_a_fed_job_runs_over_authenticated_encrypted_spark_rpc(sc_crypto):
    conf = sc_crypto.getConf()
    assert conf.get("spark.network.crypto.enabled") == "true"
    cluster = sparktf.run(
        sc_crypto, feed_jobs.sum_ids, {"col": None}, num_executors=2, input_mode=InputMode.SPARK
    )
    cluster.train(sc_crypto.parallelize(range(1, 1001), 4))
    cluster.shutdown(timeout=120)
    assert sum(r["sum"] for r in cluster.results.values()) == sum(range(1, 1001))

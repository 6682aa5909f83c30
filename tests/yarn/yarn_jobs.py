"""main_fns for the YARN tier, shipped by value to the executors (registered with cloudpickle
by the test modules)."""

import os

from tf_jobs import mwms_keras  # (tf_jobs travels by value too: conftest registers it)


def mwms_in_a_container(args, ctx):
    """tf_jobs.mwms_keras, plus the YARN container this node ran in (YARN sets CONTAINER_ID
    in every container's environment; the node process inherits it from its executor)."""
    result = mwms_keras(args, ctx)
    result["container"] = os.environ.get("CONTAINER_ID")
    return result


def sum_fed(args, ctx):
    """Sum the ids Spark feeds this node (InputMode.SPARK); its container too."""
    feed = ctx.get_data_feed(train_mode=True)
    total = count = 0
    while not feed.should_stop():
        batch = feed.next_batch(64)
        ids = batch["id"] if isinstance(batch, dict) else [row[0] for row in batch]
        total += int(sum(ids))
        count += len(ids)
    return {"sum": total, "count": count, "container": os.environ.get("CONTAINER_ID")}

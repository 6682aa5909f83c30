"""After a whole-cluster restart (max_restarts), InputMode.SPARK feeds only the epochs that are
left: main_fn says where its checkpoint is (``ctx.get_data_feed(start_epoch=k)``) and the
feed's first pass over the partition becomes epoch k. Real Spark (local[4]) and real node
processes; the checkpoint is a small JSON file per node, as a model's would be."""

import json
import os
import signal
import sys
import time

import cloudpickle
import pytest

import sparktf

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.usefixtures("no_leaks")

NODES = ("chief:0", "worker:0")


def _epochs_done(folder, name, attempt):
    """The epochs node ``name`` had finished when attempt ``attempt`` of the job ended."""
    path = os.path.join(folder, f"{name.replace(':', '')}.{attempt}.json")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return json.load(f)["epochs"]


def counts_epochs(args, ctx):
    """Reads its feed batch by batch, "checkpoints" each finished epoch, and resumes at the
    epoch both nodes had finished when the last attempt ended; worker:0 kills itself half-way through the
    last epoch of the first attempt."""
    folder = args["dir"]
    start = min(_epochs_done(folder, n, ctx.attempt - 1) for n in NODES)
    feed = ctx.get_data_feed(start_epoch=start)
    rows, epoch = {}, start

    def checkpoint():  # written whole, then renamed: the other node may read it meanwhile
        path = os.path.join(folder, f"{ctx.name.replace(':', '')}.{ctx.attempt}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"epochs": feed.epoch}, f)
        os.replace(path + ".tmp", path)

    while not feed.should_stop():  # (which moves to the next epoch when one ends)
        if feed.epoch != epoch:
            checkpoint()
            epoch = feed.epoch
        batch = feed.next_batch(25)
        rows[epoch] = rows.get(epoch, 0) + len(batch)
        if ctx.attempt == 0 and ctx.name == "worker:0" and epoch == 3 and rows[3] >= 100:
            # once the chief too has 3 epochs checkpointed (a loaded machine can hold it back)
            while _epochs_done(folder, "chief:0", 0) < 3:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
    checkpoint()
    return {"attempt": ctx.attempt, "start": start, "rows": rows, "trained": feed.epoch}


def test_a_restart_feeds_only_the_epochs_left_after_the_checkpoint(sc_local, tmp_path, capsys):
    data = sc_local.parallelize(range(1000), 4)
    cluster = sparktf.run(
        sc_local,
        counts_epochs,
        {"dir": str(tmp_path)},
        num_executors=2,
        input_mode=sparktf.InputMode.SPARK,
        max_restarts=1,
    )
    cluster.train(data, num_epochs=4, equalize=False)
    cluster.shutdown(timeout=180)
    assert cluster.attempt == 1 and [f.node for f in cluster.failures] == ["worker:0"]
    results = cluster.results
    # the restarted attempt resumed at epoch 4 (index 3) and read one epoch of rows, not four
    assert {r["start"] for r in results.values()} == {3}
    assert all(list(r["rows"]) == [3] for r in results.values())
    assert sum(r["rows"][3] for r in results.values()) == 1000
    # 4 epochs in all: 3 before the restart (checkpointed), 1 after
    assert all(r["trained"] == 4 for r in results.values())
    assert all(_epochs_done(str(tmp_path), n, 0) >= 3 for n in NODES)
    assert all(_epochs_done(str(tmp_path), n, 1) == 4 for n in NODES)
    err = capsys.readouterr().err
    assert "[worker:0] sparktf: worker:0's feed resumes at epoch 4 of 4: 1 epoch left" in err

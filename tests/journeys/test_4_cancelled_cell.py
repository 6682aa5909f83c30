"""Journey 4, a cancelled cell and a re-run: a notebook cell trains on a cluster in the cell's
job group (as Jupyter's and Zeppelin's Spark kernels run cells); the user cancels the cell
(``sc.cancelJobGroup``) while the data is still being computed, or while it is being fed;
the cell ends with a clear ``SparkJobError``, nothing of the job is left (processes, driver
threads, Spark jobs), and the cell, run again in the same SparkSession and job group
(without the slowness the user cancelled it for), trains with every row. Real Spark (local[4]), real node processes."""

import os
import threading
import time

import cloudpickle
import journey_jobs
import pytest
from helpers.procs import sparktf_processes, sparktf_threads, wait_until

import sparktf

cloudpickle.register_pickle_by_value(journey_jobs)
pytestmark = [pytest.mark.journeys, pytest.mark.usefixtures("no_leaks")]

SPARK = sparktf.InputMode.SPARK
GROUP = "cell-12"


class Cell:
    """A notebook cell run in a thread, in the cell's job group: ``run`` + ``train`` +
    ``shutdown`` (what the nodes returned is its result), or ``run`` + ``inference`` +
    ``collect`` + ``shutdown`` (the outputs are); what it raised, and its cluster, are kept."""

    def __init__(self, sc, data, args, scoring=False):
        self.sc, self.data, self.args, self.scoring = sc, data, args, scoring
        self.cluster = self.result = self.error = None
        self.thread = threading.Thread(target=self._body, name="notebook-cell")
        self.thread.start()

    def _body(self):
        self.sc.setJobGroup(GROUP, "a notebook cell", interruptOnCancel=True)
        try:
            main_fn = journey_jobs.double_slowly if self.scoring else journey_jobs.ids_slowly
            self.cluster = sparktf.run(
                self.sc, main_fn, self.args, num_executors=2, input_mode=SPARK
            )
            if self.scoring:
                self.result = self.cluster.inference(self.data).collect()
                self.cluster.shutdown()
            else:
                self.cluster.train(self.data, num_epochs=1)
                self.cluster.shutdown()
                self.result = self.cluster.results
        except BaseException as exc:
            self.error = exc

    def join(self):
        self.thread.join(60)
        assert not self.thread.is_alive(), "the cell still runs after its cancel"


def _nothing_left(sc):
    assert wait_until(lambda: not sparktf_processes(), timeout=15), sparktf_processes()
    assert wait_until(lambda: not sparktf_threads(), timeout=10), sparktf_threads()
    assert wait_until(lambda: not sc.statusTracker().getActiveJobsIds(), timeout=10)


@pytest.mark.parametrize(
    "when", ["while the data is computed", "while it is fed", "while it is scored"]
)
def test_a_cancelled_cell_fails_clearly_leaves_nothing_and_runs_again(sc_local, tmp_path, when):
    args = {"batch": 10, "col": None, "dir": str(tmp_path), "delay": 0.0}
    if when == "while the data is computed":  # a slow map before the deal-out shuffle
        data = sc_local.parallelize(range(200), 4).map(lambda x: (time.sleep(0.2), x)[1])
        cancel_when = lambda: bool(sc_local.statusTracker().getActiveStageIds())  # noqa: E731
    else:
        data = sc_local.parallelize(range(200), 4)
        args["delay"] = 1.0  # a slow training (or scoring) step
        cancel_when = lambda: len(os.listdir(tmp_path)) == 2  # noqa: E731 - both nodes fed
    scoring = when == "while it is scored"
    cell = Cell(sc_local, data, args, scoring)
    assert wait_until(cancel_when, timeout=60), "the cell never got going"
    sc_local.cancelJobGroup(GROUP)
    cell.join()

    assert isinstance(cell.error, sparktf.SparkJobError), repr(cell.error)
    assert str(cell.error).startswith("the Spark job holding the TensorFlow nodes was cancelled"), (
        cell.error
    )
    assert "org.apache" not in str(cell.error)
    assert cell.cluster is not None and cell.cluster.failures == []
    _nothing_left(sc_local)
    with pytest.raises(sparktf.SparkJobError, match="cancelled"):
        cell.cluster.shutdown()  # asked again: the same answer, at once

    # the user runs the cell again (same session, same job group), without the slowness
    for name in os.listdir(tmp_path):
        os.remove(os.path.join(tmp_path, name))
    args["delay"] = 0.0
    again = Cell(sc_local, sc_local.parallelize(range(200), 4), args, scoring)
    again.join()
    assert again.error is None, repr(again.error)
    if scoring:
        assert again.result == [2 * i for i in range(200)]
    else:
        ids = sorted(i for node in again.result.values() for i in node["epochs"][0])
        assert ids == list(range(200))
    _nothing_left(sc_local)

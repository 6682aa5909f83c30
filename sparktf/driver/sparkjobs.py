"""Spark's jobs as sparktf sees them from the driver: which of a cluster's jobs (found by its
job tag) run, their stages and tasks, cancelling them once each and waiting for their end, and
what their failures say.

Every call asks Spark's status tracker (py4j); none is made with the runner's lock held.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from sparktf.driver.job import failures
from sparktf.driver.sparkside import ConnectContext

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)


def unlaunched_note(sc: SparkContext, tag: str, hosts: Collection[str | None]) -> str | None:
    """Why no node started, where no Spark task of the attempt ever reached the driver (Spark
    never launched its barrier stage; ``hosts``: each node's, None where its task never
    reported): the other jobs that held the task slots (None if a task did start, or Spark
    cannot be asked)."""
    from sparktf.driver import sparkfacts

    if any(host is not None for host in hosts):
        return None  # its tasks launched: they are slow or stuck, not unscheduled
    try:
        tracker = sc.statusTracker()
        ours = set(jobs_tagged(sc, tag))
        others = [j for j in tracker.getActiveJobsIds() if j not in ours]
        names = []
        for job in others[:3]:
            info = tracker.getJobInfo(job)
            stage = tracker.getStageInfo(info.stageIds[-1]) if info and info.stageIds else None
            name = stage.name if stage else ""
            if name.startswith("copy_local_properties at "):  # pyspark's InheritableThread
                name = "started from a thread: another sparktf cluster?"
            names.append(f"job {job}" + (f" ({name})" if name else ""))
        slots = sparkfacts.current_slots(sc)
    except Exception:
        return None
    nodes = len(hosts)
    text = (
        f"No Spark task of the cluster ever started: Spark never launched its barrier "
        f"stage, which needs {nodes} free task slots at once (the executors have {slots})"
    )
    if others:
        text += (
            f", while {len(others)} other job(s) held slots: {', '.join(names)}; wait for "
            "them to end (a sparktf cluster's ends with its shutdown()), or ask for fewer "
            "nodes"
        )
    return text


def describe(phase: str, job_id: str, attempt: int, nodes: list[str]) -> str:
    """What Spark's UI shows for a cluster's barrier job: sparktf, the phase (``main_fn``,
    ``training``, ``inference``), the job, its attempt and its nodes."""
    return f"sparktf {phase}: job {job_id}, attempt {attempt}, nodes {' '.join(nodes)}"


def run_tagged(
    sc: Any,
    tag: str,
    stage: Callable[[], Any],
    aborted: Callable[[], bool],
    description: str = "",
) -> str | None:
    """Run ``stage`` (a cluster's barrier stage) as Spark jobs tagged ``tag`` unless
    ``aborted()``, described in Spark's UI by ``description`` (:func:`describe`); returns
    what Spark said if it failed (:func:`spark_error_text`)."""
    try:
        if isinstance(sc, ConnectContext):  # tags alone: Connect has no job groups
            sc.addJobTag(tag)
            if not aborted():
                stage()
            return None
        # The job runs in the caller's job group, if it has one (inherited with its
        # other properties), so that cancelling that group (a notebook's cancel of the
        # cell) cancels the cluster too; sparktf finds and cancels it by its own tag.
        # Without one, the job gets a group of its own, named by the tag (this thread's
        # properties only: the caller's thread is untouched).
        sc.addJobTag(tag)
        if sc.getLocalProperty("spark.jobGroup.id") is None:
            sc.setJobGroup(tag, description or f"sparktf {tag}", interruptOnCancel=True)
        else:
            sc.setInterruptOnCancel(True)
        sc.setLocalProperty("spark.job.description", description or f"sparktf {tag}")
        if not aborted():
            stage()
    except BaseException as exc:
        return spark_error_text(exc)
    return None


def jobs_tagged(sc: SparkContext, tag: str) -> list[int]:
    """The ids of the jobs Spark's status tracker knows with job tag ``tag``."""
    return list(sc._jsc.sc().statusTracker().getJobIdsForTag(tag))


def running_jobs(sc: SparkContext, tag: str) -> set[int] | None:
    """The jobs tagged ``tag`` that Spark's status tracker has not seen end (None: it
    cannot be asked)."""
    try:
        tracker = sc.statusTracker()
        running = set()
        for job in jobs_tagged(sc, tag):
            info = tracker.getJobInfo(job)
            if info is None or info.status not in ("SUCCEEDED", "FAILED"):
                running.add(job)
        return running
    except Exception:
        return None


def active_tasks(sc: SparkContext, tag: str) -> int:
    """Tasks of the jobs tagged ``tag`` still running (0 once the SparkContext is gone)."""
    try:
        tracker = sc.statusTracker()
        active = 0
        for job in jobs_tagged(sc, tag):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                stage_info = tracker.getStageInfo(stage)
                active += stage_info.numActiveTasks if stage_info else 0
        return active
    except Exception:
        return 0


def stages_before_barrier(sc: SparkContext, tag: str, barrier: dict[int, bool]) -> bool | None:
    """Whether a stage of the jobs tagged ``tag`` runs that is not a barrier stage (None if
    Spark shows no job of it yet). ``barrier`` caches, by stage id, whether it is one: the
    RDD graph Spark keeps for its UI marks barrier RDDs."""
    try:
        tracker = sc.statusTracker()
        jobs = jobs_tagged(sc, tag)
        if not jobs:
            return None
        active = set(tracker.getActiveStageIds())
        store = sc._jsc.sc().statusStore()
        for job in jobs:
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                if stage not in active:
                    continue
                if stage not in barrier:
                    barrier[stage] = _has_barrier_rdd(
                        store.operationGraphForStage(stage).rootCluster()
                    )
                if not barrier[stage]:
                    return True
        return False
    except Exception:
        return False


def _has_barrier_rdd(cluster) -> bool:
    nodes, clusters = cluster.childNodes(), cluster.childClusters()
    return any(nodes.apply(i).barrier() for i in range(nodes.size())) or any(
        _has_barrier_rdd(clusters.apply(i)) for i in range(clusters.size())
    )


def spark_stopped(sc: Any) -> bool:
    if isinstance(sc, ConnectContext):
        return sc.stopped()
    jsc = getattr(sc, "_jsc", None)
    if jsc is None:
        return True
    try:
        return bool(jsc.sc().isStopped())
    except Exception:
        return True


#: What the driver's own code stopping the SparkContext leaves in its ``stopSite``
#: (pyspark's ``stop()`` through py4j).
_USER_STOP = ("JavaSparkContext.stop", "py4j.")
#: What YARN's scheduler backend leaves there when the application ended under Spark.
_YARN_STOP = ("YarnClientSchedulerBackend", "YarnSchedulerBackend")


def why_stopped(sc: SparkContext) -> tuple[str, bool]:
    """What stopped ``sc``, as the user should read it, and whether it was their own code
    (pyspark's ``stop()``, which also drops the JVM handle) rather than Spark itself, told by
    ``SparkContext.stopSite`` (on YARN, the scheduler backend's monitor when the application
    ended: its ApplicationMaster's container lost with its host, or killed)."""
    if isinstance(sc, ConnectContext):
        return (
            "the Spark Connect session was stopped, or its server went away, while the "
            "cluster ran; every node was stopped. Stop it only after shutdown()",
            True,
        )
    jsc = getattr(sc, "_jsc", None)
    where = ""
    if jsc is not None:
        try:
            site = jsc.sc().stopSite()
            where = str(site.get().longForm()) if site.isDefined() else ""
        except Exception:
            where = ""
    if jsc is None or not where or any(x in where for x in _USER_STOP):
        return (
            "the SparkContext was stopped while the cluster ran; every node was stopped. "
            "Stop it only after shutdown()",
            True,
        )
    if any(x in where for x in _YARN_STOP):
        return (
            "Spark stopped the SparkContext while the cluster ran: the YARN application ended "
            "under it (its ApplicationMaster's container was lost, with its host, or killed: "
            "the driver's log says 'YARN application has exited unexpectedly' and why); every "
            "node was stopped, and nothing restarts on a stopped SparkContext",
            False,
        )
    first = " / ".join(x.strip() for x in where.strip().splitlines()[:3])
    return (
        f"Spark stopped the SparkContext itself while the cluster ran (at {first}); every "
        "node was stopped",
        False,
    )


class Canceller:
    """Cancels the Spark jobs of a tag, each job once, and waits for them to end."""

    def __init__(self, sc) -> None:
        self.sc = sc
        self._cancelled: set[int] = set()  # Spark job ids cancelled once

    def cancel(self, tag: str) -> None:
        """Cancel the running jobs tagged ``tag``, each once. A job that has ended, was already
        cancelled, or is not yet submitted (the callers cancel again while they wait for it)
        is left alone: Spark would answer with a warning that it "failed to cancel" the
        group."""
        running = running_jobs(self.sc, tag)
        if running is not None:
            if not running - self._cancelled:  # (the tracker lags: still "running")
                return
            self._cancelled |= running
        try:
            self.sc.cancelJobsWithTag(tag)
        except Exception as exc:
            log.info("sparktf: could not cancel %s: %s", tag, exc)

    def wait(
        self,
        thread: threading.Thread,
        tag: str,
        timeout: float,
        cancel: bool,
        succeeded: bool,
        out_of_reach: Callable[[], int] = lambda: 0,
    ) -> None:
        """Wait for the Spark job that ``thread`` runs to end; cancel it again while it runs
        (a job submitted just after a cancel would otherwise run on). Then, unless it
        ``succeeded``, wait for its tasks: a cancelled job ends before its tasks do, and the
        tasks stop their nodes as they end. Tasks whose nodes are out of reach (their number:
        ``out_of_reach()``; a partitioned or crashed host) end only when Spark declares their
        executors lost, minutes later: once no other task runs, the wait ends."""
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            if cancel:
                self.cancel(tag)
            thread.join(0.5)
        if thread.is_alive():
            log.warning("sparktf: the Spark job of %s did not end within %.0fs", tag, timeout)
            return
        if not cancel and succeeded:
            return  # every task of it has ended (no status calls: ~17 ms)
        while time.monotonic() < deadline:
            active = active_tasks(self.sc, tag)
            if not active:
                return
            lost = out_of_reach()
            if active <= lost:
                log.info(
                    "sparktf: %d task(s) of %s, on hosts out of reach, are left to Spark: they "
                    "end when it declares their executors lost",
                    active,
                    tag,
                )
                return
            time.sleep(0.1)


#: A line of a Spark job's failure that says it was cancelled: what precedes Spark's words.
_CANCELLED = re.compile(
    r"^[:\s]*(?:org\.apache\.spark\.SparkException:\s*)?"
    r"(?:\[SPARK_JOB_CANCELLED\]\s*)?(?=Job \d+ cancelled)"
)


#: What a Spark Connect client's interrupted operation says (worded as
#: :data:`~sparktf.driver.job.failures.CONNECT_CANCELLED`).
_CONNECT_CANCELLED = "[OPERATION_CANCELED]"


def spark_error_text(exc: BaseException) -> str:
    """The few lines of a Spark job failure worth reading (the nodes' own reports, which name
    them, arrive over the control channel; this is for what only Spark knows)."""
    if _CONNECT_CANCELLED in str(exc):
        return failures.CONNECT_CANCELLED
    lines = [ln.strip().removeprefix(": ") for ln in str(exc).splitlines()]  # py4j's ": "
    keep = [
        ln
        for ln in lines
        if ln
        and not ln.startswith(("at ", "...", "File ", "^"))
        and ("Exception" in ln or "Error" in ln or "sparktf" in ln or "ExecutorLostFailure" in ln)
    ]
    cancelled = [_CANCELLED.sub("", ln) for ln in keep if _CANCELLED.match(ln)]
    if cancelled:  # Spark's own words, without its class name, error class and SQL state
        return re.sub(r"\s*SQLSTATE: \w+$", "", cancelled[0])
    text = "\n  ".join(keep[:6] or lines[:6] or [type(exc).__name__])
    if "BarrierJobUnsupportedRDDChainException" in str(exc):
        text += (
            "\n  The data's lineage (union, coalesce, zip...) cannot feed a barrier stage "
            "directly: call train() without rebalance=False so sparktf reshuffles it."
        )
    if "No module named 'sparktf'" in str(exc):
        text += (
            "\n  sparktf is not installed in the executors' Python: install it there (the same "
            "version as the driver's), or ship it with the job: a packed environment in "
            "spark.archives with PYSPARK_PYTHON=./environment/bin/python (docs/yarn.md, "
            "section 3)."
        )
    return text

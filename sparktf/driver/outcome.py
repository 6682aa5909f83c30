"""The failure that ends an attempt as the user reads it: Spark's reason no node started, a
node's error as the console shows it, a SparkContext stopped under the cluster."""

from __future__ import annotations

from typing import Any

from sparktf.driver import sparkjobs
from sparktf.driver.attempt import Attempt
from sparktf.driver.history import JobHistory
from sparktf.errors import ClusterStateError, NodeError, ReservationTimeoutError, SparkTFError


def shown(sc: Any, outcome: SparkTFError, attempt: Attempt, history: JobHistory) -> SparkTFError:
    """``outcome``, the failure that ends ``attempt``, with what Spark and the driver's files
    add to it (asks Spark: call it outside the runner's lock)."""
    if isinstance(outcome, ReservationTimeoutError):
        hosts = [n.host for n in attempt.state.nodes.values()]
        why = sparkjobs.unlaunched_note(sc, attempt.job_id, hosts)
        if why:
            outcome = ReservationTimeoutError(f"{outcome}. {why}", outcome.restartable)
    if isinstance(outcome, NodeError):
        outcome = history.shown(outcome, attempt.number)
    if sparkjobs.spark_stopped(sc):
        why, by_user = sparkjobs.why_stopped(sc)
        if isinstance(outcome, NodeError) and not by_user:  # (a user's stop makes its own)
            why += f". Before that: {outcome}"
        outcome = ClusterStateError(why)
    return outcome

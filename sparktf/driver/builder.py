"""Builds a job's attempts, none started: each with a control server and a fresh secret, its
launch spec, barrier stage, job state and Spark description, and a finalizer that stops its
nodes when the interpreter exits."""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from sparktf.common import protocol
from sparktf.common.spec import LaunchSpec
from sparktf.common.topology import NodeRole
from sparktf.driver import sparkjobs, stages
from sparktf.driver.attempt import Attempt, AttemptHandler, Events, abort_quietly
from sparktf.driver.control import ControlServer
from sparktf.driver.job.limits import Limits
from sparktf.driver.job.state import JobState
from sparktf.driver.launch import CallFeed, JobPlan
from sparktf.errors import ConfigError

StageFactory = Callable[[LaunchSpec], Callable[[], Any]]


@dataclasses.dataclass(frozen=True)
class AttemptBuilder:
    """What every attempt of one job is built from; :meth:`build` makes one."""

    sc: Any
    conf: dict[str, str]  # the context's settings
    roles: tuple[NodeRole, ...]
    base_id: str
    limits: Limits
    tail_lines: int
    plan: JobPlan  # what every attempt's launch spec shares
    call: CallFeed  # what the train()/inference() call adds to it
    stage_factory: StageFactory

    def build(self, number: int, runner: Events, exiting: threading.Event) -> Attempt:
        """Build attempt ``number`` without starting it: a control server with a fresh secret
        (an earlier attempt's processes cannot reach it) whose events go to ``runner``, its
        launch spec and its stage. Its finalizer, tied to ``runner``, sets ``exiting``."""
        job_id = self.base_id if number == 0 else f"{self.base_id}-{number}"
        secret = protocol.new_secret()
        server = self._server(secret, AttemptHandler(runner, number))
        try:
            launch = self.plan.launch(
                self.call,
                job_id=job_id,
                secret=secret,
                driver_address=server.address,
                attempt=number,
            )
            stage = self.stage_factory(launch)
        except BaseException:
            server.close()
            raise
        state = JobState(self.roles, self.limits, time.monotonic(), tail_lines=self.tail_lines)
        attempt = Attempt(number, job_id, server, launch, stage, state, {})
        attempt.description = sparkjobs.describe(
            stages.phase(self.stage_factory), self.base_id, number, [r.name for r in self.roles]
        )
        # Whatever happens to the cluster object, the nodes do not outlive the interpreter.
        attempt.finalizer = weakref.finalize(
            runner, abort_quietly, self.sc, job_id, server, exiting
        )
        return attempt

    def _server(self, secret: bytes, handler: AttemptHandler) -> ControlServer:
        """The attempt's control server; one that cannot listen at the address
        ``spark.sparktf.controlHost`` names fails the run saying so."""
        bind, advertise = control_address(self.conf)
        try:
            return ControlServer(bind, advertise, secret, handler, port_range=self.plan.port_range)
        except OSError as exc:
            if not self.conf.get("spark.sparktf.controlHost"):
                raise
            raise ConfigError(
                f"the driver's control server cannot listen at {bind} "
                f"(spark.sparktf.controlHost): {exc}; set spark.sparktf.controlHost to an "
                "address of the driver's machine (the Spark Connect client's) that the "
                "executors reach, or leave it unset"
            ) from None


def control_address(conf: dict[str, str]) -> tuple[str, str]:
    """Where the control server listens and the host it tells the tasks:
    ``spark.sparktf.controlHost`` for both if set (always on Spark Connect: the client's
    address), else ``spark.driver.bindAddress`` and ``spark.driver.host``."""
    if conf.get("spark.sparktf.controlHost"):
        host = conf["spark.sparktf.controlHost"]
        return host, host
    advertise = conf["spark.driver.host"]  # a SparkContext always has it
    return conf.get("spark.driver.bindAddress", advertise), advertise

"""What a job's settings become on the driver: its :class:`JobPlan`, the part of every
:class:`~sparktf.common.spec.LaunchSpec` that all its attempts share, built once per
``sparktf.run()``. A launch spec is then built whole, once per attempt
(:meth:`JobPlan.launch`), from the plan, the call's feed (:class:`CallFeed`: ``train()`` or
``inference()``) and the attempt's own id, secret and control address: no placeholder is
shipped, and nothing is replaced afterwards.

Runs on the driver; every value comes from the resolved
:class:`~sparktf.common.settings.Settings` (no default of its own).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from typing import Any

from sparktf.common import shipped
from sparktf.common.settings import Settings
from sparktf.common.spec import FeedConfig, LaunchSpec
from sparktf.common.topology import NodeRole
from sparktf.driver import sparkfacts
from sparktf.driver.sparkfacts import hadoop_env


@dataclasses.dataclass(frozen=True)
class CallFeed:
    """What a ``train()`` or ``inference()`` call adds to its launch specs (InputMode.SPARK);
    the default, none, is InputMode.TENSORFLOW's."""

    train_mode: bool | None = None
    feed: FeedConfig | None = None
    #: inference over a DataFrame: the Arrow schema of its output
    output_schema: bytes | None = None


@dataclasses.dataclass(frozen=True)
class JobPlan:
    """The launch spec's fields that every attempt of one job shares (see
    :class:`~sparktf.common.spec.LaunchSpec` for each)."""

    job_id: str
    roles: tuple[NodeRole, ...]
    payload: Any = dataclasses.field(repr=False)
    tail_lines: int
    stop_grace: float
    env: tuple[tuple[str, str], ...]
    tensorboard: bool
    log_dir: str | None
    heartbeat_interval: float
    hadoop_env: tuple[tuple[str, str], ...]
    executor_cores: int | None
    port_range: Any
    worker_restarts: int
    rendezvous_timeout: float
    framework: str

    def launch(
        self,
        call: CallFeed,
        *,
        job_id: str,
        secret: bytes,
        driver_address: tuple[str, int],
        attempt: int,
    ) -> LaunchSpec:
        """Attempt ``attempt``'s launch spec, whole."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        shared.update({f.name: getattr(call, f.name) for f in dataclasses.fields(call)})
        shared["job_id"] = job_id
        return LaunchSpec(**shared, secret=secret, driver_address=driver_address, attempt=attempt)


def job_plan(
    sc: Any, roles: tuple[NodeRole, ...], payload: bytes, settings: Settings, conf: dict[str, str]
) -> JobPlan:
    """The job's plan, under a new job id; ``payload`` (``main_fn`` and its args) is shipped
    as a broadcast of its own when large."""
    return JobPlan(
        job_id=f"sparktf-{uuid.uuid4().hex[:12]}",
        roles=roles,
        payload=shipped.for_tasks(sc, payload),
        tail_lines=settings.tail_lines,
        stop_grace=settings.stop_grace,
        env=settings.env,
        tensorboard=settings.tensorboard,
        log_dir=settings.log_dir,
        heartbeat_interval=min(1.0, (settings.heartbeat_timeout or 3.0) / 3),
        hadoop_env=hadoop_env(sc),
        executor_cores=sparkfacts.executor_cores(sc.master, conf, os.cpu_count() or 1),
        port_range=settings.port_range,
        worker_restarts=settings.restarts_in_place,
        rendezvous_timeout=settings.reservation_timeout,
        framework=settings.framework,
    )

"""What a job's settings become on the driver: the :class:`~sparktf.common.spec.LaunchSpec`
every attempt's barrier tasks carry (each attempt adds its own secret and control address)
and the :class:`~sparktf.driver.runner.Runner` that carries the job out, with its
:class:`~sparktf.driver.job.limits.Limits` (:meth:`~sparktf.driver.job.limits.Limits.of`).

Runs on the driver, once per ``sparktf.run()``; every value comes from the resolved
:class:`~sparktf.common.settings.Settings` (no default of its own).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from sparktf.common import shipped
from sparktf.common.settings import Settings
from sparktf.common.spec import LaunchSpec
from sparktf.common.topology import NodeRole
from sparktf.driver import sparkfacts
from sparktf.driver.sparkfacts import hadoop_env


def launch_spec(
    sc: Any, roles: tuple[NodeRole, ...], payload: bytes, settings: Settings, conf: dict[str, str]
) -> LaunchSpec:
    """The job's launch spec, under a new job id; ``payload`` (``main_fn`` and its args) is
    shipped as a broadcast of its own when large."""
    return LaunchSpec(
        job_id=f"sparktf-{uuid.uuid4().hex[:12]}",
        roles=roles,
        driver_address=("", 0),
        secret=b"",
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

"""Horovod on the gang: a training node's Horovod environment, set before ``main_fn`` runs
(``run(framework="horovod")``), so that its ``hvd.init()`` joins the others as under
``horovodrun --gloo``.

The chief serves Horovod's own HTTP rendezvous server (``horovod.runner.http``, what
``horovod.spark`` runs on the driver) on the port sparktf reserved for it, for as long as its
process lives; the other nodes wait until it answers. Runs inside the node process; imports
horovod's runner (no TensorFlow) on the chief only.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import socket
import sys
import threading
import time
from typing import Any

from sparktf.common import horovod
from sparktf.errors import ClusterTimeoutError, ConfigError

#: What a node without Horovod is told to install.
INSTALL = (
    "framework='horovod' needs Horovod built with TensorFlow and Gloo in every executor's "
    "Python: HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 pip install "
    "--no-build-isolation horovod==0.28.1 (it builds against TensorFlow 2.16 to 2.18; see "
    "docs/compatibility.md), or run without framework='horovod'"
)


def prepare(ctx: Any, timeout: float) -> dict[str, str]:
    """Set this node's ``HOROVOD_*`` environment; on the chief, start the rendezvous server
    first, elsewhere wait up to ``timeout`` seconds for it. Returns the variables set."""
    if importlib.util.find_spec("horovod") is None:
        raise ConfigError(
            f"this node's Python ({sys.executable}) cannot import horovod. If Horovod is "
            "installed in another Python (a venv), point the executors at it: "
            "PYSPARK_PYTHON=/path/to/venv/bin/python (or spark.pyspark.python) for the whole "
            "job, or ship that environment (docs/yarn.md). Otherwise: " + INSTALL
        )
    plan = horovod.cluster_slots(ctx.cluster_spec)
    address = horovod.rendezvous_address(ctx.cluster_spec)
    if ctx.rank == 0:
        serve(ctx.host, ctx.port, plan)
    else:
        wait_for(address, timeout)
    env = horovod.environment(plan[ctx.rank], address, interface_of(ctx.host), timeout)
    for key in horovod.TUNABLE:  # the user's env (run(env=...)) wins
        if os.environ.get(key):
            env.pop(key, None)
    os.environ.update(env)
    return env


def serve(host: str, port: int, plan: tuple[horovod.Slot, ...]) -> Any:
    """Horovod's rendezvous server on ``host:port``, initialized with ``plan``, served from a
    daemon thread (it ends with the process)."""
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(RendezvousHTTPServer):
        address_family = family  # the HTTP server binds with SO_REUSEADDR, as TF's does

    server = Server((host, port), RendezvousHandler, False)
    server.init(plan)
    threading.Thread(
        target=server.serve_forever, name="sparktf-hvd-rendezvous", daemon=True
    ).start()
    return server


def wait_for(address: tuple[str, int], timeout: float) -> None:
    """Until the chief's rendezvous server takes connections: Horovod gives up on a refused
    one within 1.5 s, and the chief may start later than this node."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(address, timeout=5).close()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise ClusterTimeoutError(
                    f"the chief's Horovod rendezvous server at {horovod.describe(address)} "
                    f"did not answer within {timeout:g}s ({exc}): read the chief's output, "
                    "or raise spark.sparktf.reservationTimeout"
                ) from exc
            time.sleep(0.2)


def interface_of(host: str) -> str | None:
    """The network interface that holds ``host``'s address (None: not found here)."""
    import psutil

    try:
        ips = {ipaddress.ip_address(i[4][0]) for i in socket.getaddrinfo(host, None)}
    except (OSError, ValueError):
        return None
    for name, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            try:
                if ipaddress.ip_address(a.address.split("%")[0]) in ips:
                    return name
            except ValueError:
                continue
    return None

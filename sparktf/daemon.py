"""A Spark Python worker daemon with TensorFlow already imported: every Python worker it forks
(sparktf's barrier tasks, the TF processes they fork, ``sparktf.predict``'s scoring tasks) finds
``tensorflow`` in ``sys.modules`` instead of paying its import (1.5-3 s of a core) on the way.

    spark = (SparkSession.builder
             .config("spark.python.daemon.module", "sparktf.daemon")
             .config("spark.executorEnv.SPARKTF_PRELOAD", "tensorflow,tf_keras")  # optional
             .getOrCreate())
    sparktf.warm_up(spark)  # optional: start the daemons now, while the driver loads data

Spark starts one daemon per executor (and per set of worker environment variables: Spark SQL's
Python stages add one, so a DataFrame stage and an RDD stage each have their own) the first time
a Python task runs there, and forks every Python worker from it. This module is pyspark's own
daemon (:func:`pyspark.daemon.manager`) preceded by the imports ``SPARKTF_PRELOAD`` names
(comma-separated; default ``tensorflow``, which is imported without the Keras that ``import
tensorflow`` eagerly pulls in, see :mod:`sparktf.common.tfimport`). The first Python task on each
executor waits for those imports; :func:`sparktf.warm_up` moves that wait off the critical path.

What it does not change: nothing of TensorFlow's runtime starts in the daemon (no eager context,
no device, no thread pool of TF's: an import only), so a forked TF process still creates its own
context with its own TF_CONFIG, thread counts and CUDA_VISIBLE_DEVICES. What it does change:
the few settings TensorFlow's native code reads while it loads (``TF_CPP_MIN_LOG_LEVEL``,
``TF_ENABLE_ONEDNN_OPTS``) come from the executor's environment (``spark.executorEnv.*``), not
from ``sparktf.run(env=...)``. A preload that fails is reported on the executor's stderr and
skipped; the daemon starts regardless and the workers import it themselves as before. With
``spark.executor.pyspark.memory`` under 4 GB (a cap on each worker's address space, of which
TensorFlow takes about 1.7 GB) nothing is preloaded. ``SPARKTF_DAEMON_VERBOSE=1`` (as
``spark.executorEnv.SPARKTF_DAEMON_VERBOSE``) prints each preload's seconds on stderr.

Executor side: imports pyspark and (only when run as the daemon) TensorFlow.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time
from collections.abc import Iterable, Mapping
from typing import TextIO

#: The environment variable that names the modules to import before forking workers.
PRELOAD_ENV = "SPARKTF_PRELOAD"
DEFAULT_PRELOAD = ("tensorflow",)


def preload_names(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The module names ``SPARKTF_PRELOAD`` asks for, in order, without repeats; unset means
    ``tensorflow``, and an empty value means none."""
    raw = environ.get(PRELOAD_ENV)
    if raw is None:
        return DEFAULT_PRELOAD
    names: list[str] = []
    for name in raw.replace(" ", ",").split(","):
        if name and name not in names:
            names.append(name)
    return tuple(names)


def preload(names: Iterable[str], err: TextIO | None = None) -> dict[str, str]:
    """Import each of ``names`` (``tensorflow`` without its eager Keras import); a failure is
    written to ``err`` (stderr) and the rest still load. Returns {name: "" or the error}.

    Nothing may reach file descriptor 1 meanwhile: pyspark's daemon tells the JVM its port on
    stdout, so whatever an import prints there goes to stderr instead; TensorFlow's native
    start-up chatter is left off (:func:`sparktf.common.logfilter.startup_chatter_filtered`)."""
    from sparktf.common import logfilter, tfimport

    err = err or sys.stderr
    outcome: dict[str, str] = {}
    sys.stdout.flush()
    saved_out, saved_stdout = os.dup(1), sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        with logfilter.startup_chatter_filtered():
            for name in names:
                started = time.monotonic()
                try:
                    if name == "tensorflow":
                        tfimport.tensorflow_without_keras()
                    else:
                        importlib.import_module(name)
                    outcome[name] = ""
                except BaseException as exc:
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    outcome[name] = f"{type(exc).__name__}: {exc}"
                    print(
                        f"sparktf.daemon: could not preload {name} ({outcome[name]}); the "
                        f"Python workers import it themselves (set {PRELOAD_ENV} to change "
                        f"what is preloaded)",
                        file=err,
                        flush=True,
                    )
                else:
                    took = time.monotonic() - started
                    if os.environ.get("SPARKTF_DAEMON_VERBOSE"):
                        print(
                            f"sparktf.daemon: preloaded {name} in {took:.2f} s",
                            file=err,
                            flush=True,
                        )
    finally:
        sys.stdout.flush()
        sys.stdout = saved_stdout
        os.dup2(saved_out, 1)
        os.close(saved_out)
    return outcome


#: ``spark.executor.pyspark.memory`` caps each Python worker's address space (RLIMIT_AS), and
#: TensorFlow and tf_keras take about 1.7 GB of it once imported: below this cap a worker
#: forked with them would keep too little for its own task, so nothing is preloaded.
MIN_WORKER_MEMORY_MB = 4096


def names_to_preload(
    environ: Mapping[str, str] = os.environ, err: TextIO | None = None
) -> tuple[str, ...]:
    """:func:`preload_names`, or none (with a note on ``err``) when Spark caps each Python
    worker's memory below :data:`MIN_WORKER_MEMORY_MB`."""
    names = preload_names(environ)
    limit = environ.get("PYSPARK_EXECUTOR_MEMORY_MB")
    if names and limit and limit.isdigit() and int(limit) < MIN_WORKER_MEMORY_MB:
        print(
            f"sparktf.daemon: not preloading {', '.join(names)}: spark.executor.pyspark.memory "
            f"gives each Python worker {limit} MB of address space, and TensorFlow takes "
            f"about 1.7 GB of it; raise it to {MIN_WORKER_MEMORY_MB} MB or more to preload",
            file=err or sys.stderr,
            flush=True,
        )
        return ()
    return names


def main() -> None:
    """``python -m sparktf.daemon``, as Spark starts it: preload, then pyspark's daemon."""
    preload(names_to_preload())
    # What the imports allocated stays put in the forked workers' shared pages: the collector
    # leaves it alone instead of touching (and so copying) it in every worker.
    gc.freeze()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()

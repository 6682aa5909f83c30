"""``server.join()`` in a ``main_fn``: serve until training is over, as ``ctx.serve()`` does.

Plain TensorFlow ends the program of a ``ParameterServerStrategy`` worker (and of a classic
between-graph parameter server) with ``tf.distribute.Server(...).join()``, which never returns:
the coordinator's side of the job decides when it is over. On sparktf a chief's, worker's or
evaluator's ``main_fn`` that joined so was never done, so the driver waited for it for ever
after the chief had finished (the job hung until ``shutdown(timeout=...)`` gave up).

In a node's process, :func:`install` makes ``join()`` on a TensorFlow server report the node
as serving (as ``ctx.serve()`` does) and wait for the driver's ``stop``: once every training
node's ``main_fn`` has returned or serves, or when the job fails. Then ``join()`` returns and
``main_fn`` goes on to its end. A ``join()`` in another thread than ``main_fn``'s waits for the
stop too, but reports nothing: ``main_fn`` itself is still running. TensorFlow is not imported
here: the patch is applied when its server module is imported (or at once if it already is).
Parameter servers run sparktf's own server and never a ``main_fn``, so they are untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktf.node.runtime import NodeRuntime

import threading

from sparktf.node.patches import on_import

MODULE = "tensorflow.python.training.server_lib"


def install(runtime: NodeRuntime) -> None:
    """``Server.join`` in this process serves until ``runtime``'s stop, reporting it."""
    on_import.after_import(MODULE, lambda module: _patch(module, runtime))


def _patch(module, runtime) -> None:
    def join(self) -> None:
        """Serve until the job's training is over (sparktf: see :mod:`sparktf.node.patches.join`)."""
        if threading.current_thread() is threading.main_thread():
            runtime.report_state("serving")  # main_fn's own thread: this node only serves
        runtime.stop.wait()  # a thread of main_fn's own: main_fn goes on (and ends the node)

    on_import.wrap(getattr(module, "Server", None), "join", lambda original: join)

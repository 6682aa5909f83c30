"""Whether this node process trains in lock-step with its peers, sent with every heartbeat.

Set when its ``main_fn`` creates a multi-worker ``MultiWorkerMirroredStrategy`` (its
all-reduce, :mod:`sparktf.node.patches.mwms`) or a TF1 ``SyncReplicasOptimizer`` (its gradient
aggregation, :mod:`sparktf.node.patches.tf1_sessions`). Under either, a chief or worker that takes fewer steps
than its peers returns, and a peer waits for it for ever: the driver names a peer that idles
after such a return (``JobState._note_idle_collectives``). No TensorFlow import here.
"""

from __future__ import annotations

#: What makes this process train in lock-step with its peers (for the driver's message):
#: "MultiWorkerMirroredStrategy" or "SyncReplicasOptimizer"; None while nothing does.
kind: str | None = None


def mark(what: str) -> None:
    global kind
    kind = kind or what

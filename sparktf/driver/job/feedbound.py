"""The feed bound, as the driver keeps it: from every training node's feed reports, how many
rows each may hand out this epoch (``feed_bound``), and the plan to move surplus rows between
shares fed as they are. Each node holds what it is sent in its own
:class:`sparktf.node.feed.equalize.FeedBound` (see :mod:`sparktf.node.feed`).

Pure: no sockets, no threads, no Spark.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from sparktf.common import messages
from sparktf.driver.job.records import Send

FLOW_EVERY = messages.FLOW_EVERY


def held_back(counts: list[int]) -> int:
    """Rows of an epoch equalization holds back from shares of these sizes, once the surplus
    has moved (:func:`moves`): ``sum % len``, fewer than one per training node."""
    return sum(counts) % len(counts) if counts else 0


def moves(counts: list[int]) -> tuple[int, list[tuple[int, int, int]]]:
    """How to equalize shares of these sizes by moving rows between nodes, not reshuffling.

    Returns ``(target, moves)``: every share ends with ``target = sum // len`` rows; each move
    ``(giver, taker, rows)`` sends the giver's last rows to a node with fewer than ``target``
    (givers and takers in rank order, each giver's tail dealt out in order). No moves when no
    share has fewer than ``target``. Only the ``sum % len`` rows (fewer than one per node)
    that no node can take stay held back, at the end of the last givers' shares.
    """
    if not counts:
        return 0, []
    target = sum(counts) // len(counts)
    needs = [[j, target - c] for j, c in enumerate(counts) if c < target]
    out: list[tuple[int, int, int]] = []
    for giver, count in enumerate(counts):
        spare = count - target
        while spare > 0 and needs:
            taker, need = needs[0]
            rows = min(spare, need)
            out.append((giver, taker, rows))
            spare -= rows
            needs[0][1] -= rows
            if not needs[0][1]:
                needs.pop(0)
    return target, out


class FeedBound:
    """The bound of one attempt's training nodes (``trainers``: their names, in rank order)."""

    def __init__(self, trainers: Sequence[str]) -> None:
        self.trainers = list(trainers)
        self.rows_moved = 0  # rows moved between training nodes to equalize their shares
        #: Per node that reported: (rows its feed received, whether its share has ended).
        self._reported: dict[str, tuple[int, bool]] = {}
        # the last bound sent: (rows, final, whether some training node's share has ended)
        self._sent: tuple[int, bool, bool] | None = None
        #: Per training node: the fewest rows another training node has reported, as sent.
        self._others_sent: dict[str, int] = {}
        #: When each training node was last sent its bound (for :meth:`_say_rows_flow`).
        self._sent_at: dict[str, float] = {}
        self._exchange: dict[str, str] = {}  # training node -> where it takes moved rows
        self._stopped: set[str] = set()  # shares ended early: terminate(), main_fn done
        self._moves: dict[str, dict] = {}  # node -> its part of the plan sent with the bound

    @property
    def final(self) -> bool:
        """The epoch's length (and any plan to move rows) is settled."""
        return self._sent is not None and self._sent[1]

    def reported(self, node: str) -> bool:
        """Whether ``node``'s feed has reported its progress (it reads its feed)."""
        return node in self._reported

    def on_hello(self, node: str) -> list[Send]:
        """A training node connected: a bound broadcast before (a share that ended at once,
        e.g. empty data) would otherwise never reach it: nothing changes it again."""
        return [self._message((node,))] if self._sent is not None else []

    def on_report(self, node: str, msg: dict, now: float) -> list[Send]:
        """A ``feed_progress`` report from ``node``; returns the bounds to send."""
        flowed = msg["received"] > self._reported.get(node, (0, False))[0]
        self._reported[node] = (msg["received"], msg["ended"])
        if msg.get("exchange"):
            self._exchange[node] = msg["exchange"]
        if msg.get("stopped"):
            self._stopped.add(node)
        sends = self._broadcast()
        if flowed and not self.final:
            sends += self._say_rows_flow(sends, now)
        for send in sends:
            for name in send.to:
                self._sent_at[name] = now
        return sends

    def on_done(self, node: str) -> list[Send]:
        """``node``'s main_fn returned: its share has ended too, and it can take no moved
        rows."""
        if node not in self._reported:
            return []
        self._reported[node] = (self._reported[node][0], True)
        self._stopped.add(node)
        return self._broadcast()

    def _say_rows_flow(self, sends: list[Send], now: float) -> list[Send]:
        """Rows still flow to some node: every other training node that has heard nothing of
        the feeds for FLOW_EVERY seconds hears its bound again, unchanged, so that its
        ``feed_timeout`` (an idle timeout) does not run out while it waits for that share."""
        told = {name for send in sends for name in send.to}
        return [
            self._message((name,))
            for name in self.trainers
            if name not in told
            and name in self._sent_at
            and now - self._sent_at[name] >= FLOW_EVERY
        ]

    def _message(self, to: tuple[str, ...]) -> Send:
        assert self._sent is not None
        bound, final, peers_ended = self._sent
        extra: dict = {"ended": True} if peers_ended else {}
        if len(to) == 1 and self._moves.get(to[0]):
            extra.update(self._moves[to[0]])
        if len(to) == 1 and not final and to[0] in self._others_sent:
            extra["others"] = self._others_sent[to[0]]
        return Send(
            to, messages.NODE, messages.make("feed_bound", bound=bound, final=final, **extra)
        )

    def _broadcast(self) -> list[Send]:
        """How many rows every training node may hand out."""
        if self.final:
            return []  # the epoch's length (and any plan to move rows) is settled
        trainers = self.trainers
        progress = [self._reported.get(name, (0, False)) for name in trainers]
        ended = [rows for rows, done in progress if done]
        bound = (min(p[0] for p in progress), False, bool(ended))
        if self._exchange and not self._stopped:
            # Each node able to take rows: final once every share has ended. A share with
            # fewer than sum // len rows: move the surplus, so that only sum % len rows
            # (fewer than one per node) are held back.
            if len(ended) == len(trainers) and all(t in self._exchange for t in trainers):
                target, plan = moves(ended)
                if plan:
                    return self._send_moves(target, plan)
                bound = (min(ended), True, True)
        # Final as soon as every unfinished share already has as many rows as the smallest
        # finished one: it can only grow, so that smallest count is the epoch's length.
        elif ended and all(done or rows >= min(ended) for rows, done in progress):
            bound = (min(ended), True, True)
        # Each node also hears the fewest rows any other node has reported: with its own
        # count, fresh, that bounds it without waiting for its own reports to come back.
        # (the fewest of all, or for the node that has it, the next fewest: two smallest)
        others = {}
        if not bound[1] and len(trainers) > 1:
            (low, low_at), (second, _) = heapq.nsmallest(
                2, ((p[0], i) for i, p in enumerate(progress))
            )
            others = {name: second if i == low_at else low for i, name in enumerate(trainers)}
        # A node hears a change of its own others, of final or ended, and, where it has no
        # others (a single training node), of the bound: the bound's value alone moving (a
        # node's report coming back to it) changes nothing a node with others decides.
        prev = self._sent
        to = [
            name
            for name in trainers
            if prev is None
            or bound[1:] != prev[1:]
            or others.get(name) != self._others_sent.get(name)
            or (name not in others and bound != prev)
        ]
        self._sent, self._others_sent = bound, others
        return [self._message((name,)) for name in to]

    def _send_moves(self, target: int, moves: Sequence[tuple[int, int, int]]) -> list[Send]:
        """The final bound with each node's part of the plan: whom it gives its last rows to
        (and where that node takes them), or from whom it takes rows, in order."""
        for giver, taker, rows in moves:
            g, t = self.trainers[giver], self.trainers[taker]
            self._moves.setdefault(g, {"give": []})["give"].append([t, self._exchange[t], rows])
            self._moves.setdefault(t, {"take": []})["take"].append([g, rows])
        self._sent = (target, True, True)
        self.rows_moved = sum(rows for _, _, rows in moves)
        return [self._message((name,)) for name in self.trainers]

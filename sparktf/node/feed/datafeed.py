"""The consumer's API over this node's share: ``next_batch`` / ``should_stop`` / ``terminate``
/ ``batch_results`` / ``to_dataset``. How the share arrives, is kept and is equalized:
:mod:`sparktf.node.feed`."""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from sparktf.common import feedwire, messages
from sparktf.common.ports import PortRange
from sparktf.common.settings import checked, count
from sparktf.common.spec import FeedConfig
from sparktf.errors import ConfigError, FeedError
from sparktf.node.feed import batches
from sparktf.node.feed.equalize import FeedBound
from sparktf.node.feed.exchange import Exchange
from sparktf.node.feed.reports import ProgressReports
from sparktf.node.feed.results import as_rows
from sparktf.node.feed.spool import Spool
from sparktf.node.feed.stream import EOF, Stream

#: What a batch size may be (an int >= 1), as the settings table checks it.
POSITIVE = count(1)

#: A node's name, host and the job's secret, and the port range its row exchange listens in
#: (``spark.sparktf.portRange``; none given: any port).
Peer = tuple[str, str, bytes] | tuple[str, str, bytes, PortRange | None]


def _check_input_mapping(input_mapping: dict | None) -> None:
    """``input_mapping`` is None or a dict of DataFrame column -> name in the batches."""
    if input_mapping is not None and not (
        isinstance(input_mapping, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in input_mapping.items())
    ):
        raise ConfigError(
            f"input_mapping must be a dict of DataFrame column -> name in the "
            f"batches, such as {{'image': 'x', 'label': 'y'}}, got "
            f"{input_mapping!r}"
        )


class DataFeed:
    """This node's share of the data; ``next_batch`` / ``should_stop`` / ``terminate``.

    Semantics follow TensorFlowOnSpark's ``DataFeed``: ``next_batch(n)`` returns at most ``n``
    items, never crossing an epoch boundary; for an RDD a list of its elements as they are, for
    a DataFrame a dict of column name (or ``input_mapping`` name) to a numpy array whose first
    dimension is the batch.
    """

    def __init__(
        self,
        sock_path: str,
        *,
        train_mode: bool,
        input_mapping: dict | None,
        config: FeedConfig,
        spool_dir: str,
        report: Callable[[dict], None],
        bound: FeedBound,
        peer: Peer | None = None,
        first_epoch: int = 0,
    ) -> None:
        """``peer``: this node's name, host and the job's secret (and port range), where its
        share is fed as it is and rows may have to move between nodes (``config.exchange``)."""
        import numpy  # noqa: F401 - fail early if missing

        _check_input_mapping(input_mapping)
        self.train_mode = train_mode
        #: The epoch of cluster.train's this feed's first pass is (main_fn resumed there)
        self.first_epoch = first_epoch
        self.input_mapping = dict(input_mapping) if input_mapping else None
        self.config = config
        self._report = report
        self._equalizing = bool(config.equalize and train_mode)
        self._bound = bound
        exchange_peer = peer if self._equalizing and config.exchange else None
        moving = exchange_peer is not None
        path = os.path.join(spool_dir, "epoch1.spool")
        self._spool = (
            Spool(path, config.spool_max_bytes, config.num_epochs)
            if config.num_epochs > 1
            else None
        )
        self._waiting = False  # the consumer waits for the other nodes' rows (the bound)
        self._exchange: Exchange | None = None
        if exchange_peer is not None:  # listening before the first progress report, which
            name, host, secret, *ports = exchange_peer  # says where
            self._exchange = Exchange(
                name, host, secret, bound, config.feed_timeout, ports[0] if ports else None
            )
        self._reports = ProgressReports(report, bound, self._exchange)
        if self._equalizing:
            bound.follow(lambda: self._stream.received, self._reports.bound_moved)
        self._stream = self._open_stream(sock_path, path, moving)
        if self._exchange is not None:
            self._exchange.attach(self._stream)
        self._start_position()
        self.results_sent = 0
        #: Rows handed to the consumer so far, every epoch together (sent with heartbeats).
        self.rows_fed = 0
        #: When the consumer first asked for a batch that had rows, and when it last got one:
        #: the feed's rate is rows_fed over the time between (``feeding_secs``).
        self._first_asked: float | None = None
        self._last_fed: float | None = None

    def _open_stream(self, sock_path: str, path: str, moving: bool) -> Stream:
        """The stream of this node's share from its barrier task (``path``: the spool's file;
        ``moving``: rows may move between nodes)."""
        config, bound = self.config, self._bound
        return Stream(
            sock_path,
            config,
            self._spool,
            self._reports.send if self._equalizing else None,
            # one epoch: a spool only for what must wait on disk (see Stream, Exchange)
            spool_factory=(lambda: Spool(path, config.spool_max_bytes, config.num_epochs))
            if moving
            else None,
            spill_when=(lambda: self._waiting and bound.peers_ended) if moving else None,
            on_rows=bound.poke if self._equalizing else None,
        )

    def _start_position(self) -> None:
        """The consumer's place, before its first batch: the epoch, the chunk, the replay."""
        self._taking: Iterator | None = None  # epoch 1's rows from other nodes, once planned
        self._stream_done = False  # the consumer has taken the end of the stream
        self._epoch0_delivered: int | None = None
        self._replay_held_back = 0
        self._epoch = 0
        self._delivered = 0  # rows handed out in the current epoch
        self._last_epoch_rows = 0  # ... in the one before
        self._chunk: Any = None  # current chunk (RecordBatch or list) and our place in it
        self._chunk_pos = 0
        self._replay: Iterator | None = None
        self._terminated = False
        self._stopped = False

    _stream: Stream  # (equalizing, the bound's ``own`` reads it: set after that lambda)

    def _share_rows(self) -> int:
        """The rows of this node's share: its partition's, moves included."""
        return self._stream.total + self._bound.rows_taken - self._bound.rows_given

    # --------------------------------------------------------------------------- chunks
    def _replay_frames(self, spool: Spool) -> list[tuple[int, int | None]]:
        """The spool frames of this node's share, each with the rows to take from it (None:
        all): its partition's frames, less the rows it gave away, then the rows it took."""
        frames = spool.frames
        if self._exchange is None:
            return [(i, None) for i in range(len(frames))]
        own = self._stream.total - self._bound.rows_given
        out, pos, i = [], 0, 0
        while pos < own:
            rows = frames[i][2]
            out.append((i, None if pos + rows <= own else own - pos))
            pos, i = pos + rows, i + 1
        return out + [(j, None) for j in self._exchange.frames_taken(self._bound.takes)]

    def _replay_chunks(self) -> Iterator:
        """The spooled share, frame by frame (shuffled if asked)."""
        import numpy as np

        stream, spool = self._stream, self._spool
        if spool is None:  # one epoch only: nothing is replayed
            raise FeedError("the first pass over the data was not spooled; cannot replay it")
        if not stream.ended.wait(self.config.feed_timeout) or stream.rows is None:
            raise FeedError("the first pass over the data did not complete; cannot replay it")
        frames = self._replay_frames(spool)
        rng = np.random.RandomState(self.config.seed + self._epoch)
        if self.config.shuffle:
            # numpy's stub takes an ArrayLike; shuffle() permutes any mutable sequence in place
            rng.shuffle(frames)  # type: ignore[arg-type]
        for index, rows in frames:
            kind, payload, _ = spool.read(index)
            chunk = batches.decode(kind, payload, stream.schema)
            if rows is not None:
                chunk = batches.cut(chunk, 0, rows)
            yield batches.shuffled(chunk, rng) if self.config.shuffle else chunk

    def _next_chunk(self):
        if self._epoch == 0:
            if not self._stream_done:
                item = self._stream.take()
                if isinstance(item, BaseException):
                    raise item
                if item is not EOF:
                    return item
                self._stream_done = True
            return self._taken_chunk()
        if self._replay is None:
            self._replay = self._replay_chunks()
        return next(self._replay, EOF)

    def _taken_chunk(self):
        """After this node's own partition: the rows other nodes give it (the plan comes with
        the final bound), then :data:`EOF`."""
        if self._taking is None:
            exchange = self._exchange
            takes = self._bound.takes if exchange is not None else []
            if exchange is None or not takes:
                return EOF
            self._taking = exchange.taken(takes)
        return next(self._taking, EOF)

    def _end_epoch(self, leftover: int) -> None:
        if self._epoch == 0:
            self._epoch0_delivered = self._delivered  # its leftover is known at the stream's end
            self._stream.leave()
        else:
            self._replay_held_back += leftover
        self._epoch += 1
        self._last_epoch_rows = self._delivered
        self._delivered = 0
        self._chunk, self._chunk_pos, self._replay = None, 0, None
        if self._epoch >= self.config.num_epochs:
            self._stopped = True

    # ------------------------------------------------------------------------ consumer API
    def next_batch(self, batch_size: int) -> Any:
        """The next ``batch_size`` items of the current epoch: fewer only for the epoch's last
        batch (a batch never spans two epochs). Empty once ``should_stop()``; called without
        asking ``should_stop()`` first, also where an epoch ended exactly where the previous
        batch did. Under equalization every node gets the same sizes."""
        batch_size = checked("batch_size", batch_size, POSITIVE)
        self._stream.hint(batch_size)
        bound = self._bound if self._equalizing else None
        parts, got = [], 0
        asked = time.monotonic()
        while got < batch_size and not self._stopped:
            if not self._rows_at_hand():
                break  # the epoch ended: a batch never spans two
            left = batches.rows(self._chunk) - self._chunk_pos
            take = min(batch_size - got, left)
            if bound is not None:
                take = bound.allows(self._delivered, take)
            parts.append(batches.cut(self._chunk, self._chunk_pos, take))
            self._chunk_pos += take
            self._delivered += take
            self.rows_fed += take
            if self._epoch == 0:
                self._stream.release(self._delivered)
            got += take
            if self._chunk_pos >= batches.rows(self._chunk):
                self._chunk = None
        if got:
            if self._first_asked is None:
                self._first_asked = asked
            self._last_fed = time.monotonic()
        return batches.assemble(parts, self._stream.schema, self.input_mapping)

    @property
    def feeding_secs(self) -> float | None:
        """Seconds from the first batch asked for to the last one handed out (None before)."""
        if self._first_asked is None or self._last_fed is None:
            return None
        return self._last_fed - self._first_asked

    def _wait_for_peers(self, bound: FeedBound) -> None:
        self._waiting = True
        try:
            bound.wait_beyond(self._delivered, self.config.feed_timeout)
        finally:
            self._waiting = False

    @property
    def stopped(self) -> bool:
        """No row is left to hand out: every epoch delivered, or :meth:`terminate` called
        (unlike :meth:`should_stop`, never waits: what the Dataset's reader asks)."""
        return self._stopped

    @property
    def delivered(self) -> int:
        """Rows handed out in the current epoch so far (0: a new epoch has begun)."""
        return self._delivered

    @property
    def rows_held_back(self) -> int:
        """Rows of this node's share not delivered, over every epoch so far (equalization)."""
        held = self._replay_held_back
        if self._epoch0_delivered is not None:
            held += self._share_rows() - self._epoch0_delivered
        return held

    @property
    def epoch(self) -> int:
        """The epoch ``next_batch`` hands out rows from (0 first; of ``cluster.train``'s
        epochs, counting those before ``start_epoch``)."""
        return self.first_epoch + self._epoch

    @property
    def epoch_rows(self) -> int:
        """Rows handed out in the current epoch (after the last one: in the last one)."""
        return self._last_epoch_rows if self._stopped and not self._delivered else self._delivered

    def should_stop(self) -> bool:
        """True once every epoch has been delivered, or after :meth:`terminate`.

        It looks ahead as ``next_batch`` would (waiting for the next row, or for the peers
        under equalization): an epoch ends as soon as its last row has been handed out, so a
        ``while not feed.should_stop(): batch = feed.next_batch(n)`` loop never gets an empty
        batch, even where an epoch's rows are a multiple of ``n``."""
        while not self._stopped and not self._rows_at_hand():
            pass  # that epoch had no rows left: look into the next one
        return self._stopped

    def _rows_at_hand(self) -> bool:
        """Wait until the current epoch's next row is at hand (True), or end the epoch when it
        has none left (False)."""
        bound = self._bound if self._equalizing else None
        while True:
            if bound is not None and self._delivered >= bound.limit():
                if bound.final:  # this epoch is complete for every node
                    self._end_epoch(self._share_rows() - self._delivered)
                    return False
                # Wait even with a part of a batch in hand: batch boundaries must not depend
                # on timing, or equal rows would still make unequal steps.
                self._wait_for_peers(bound)
                continue
            if self._chunk is not None and self._chunk_pos < batches.rows(self._chunk):
                return True
            chunk = self._next_chunk()
            if chunk is EOF:
                if bound is not None and not bound.final:
                    self._wait_for_peers(bound)
                    continue
                self._end_epoch(0)
                return False
            self._chunk, self._chunk_pos = chunk, 0

    def terminate(self) -> None:
        """Stop the feed now: the Spark side stops reading the partition."""
        if self._terminated:
            return
        self._terminated = self._stopped = True
        self._stream.terminate()
        if self.config.equalize:
            self._report(
                messages.make("feed_progress", received=self._delivered, ended=True, stopped=True)
            )

    def batch_results(self, results: Any) -> None:
        """Send one output per row of the batch just taken (inference): a list, an array or
        tensor with a row per input row (``model.predict(x)``, ``model(x)``), or a dict of
        those by output column (a model's named outputs)."""
        if self.train_mode:
            raise FeedError(
                "batch_results() is for inference: get the feed with "
                "ctx.get_data_feed(train_mode=False)"
            )
        results = as_rows(results)
        self._stream.send(feedwire.RESULT, pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
        self.results_sent += len(results)

    def close(self) -> None:
        """End of this node's use of the feed (called by sparktf when main_fn returns).

        Inference must answer every row of the share: a main_fn that returns (or terminates
        the feed) before it has read and answered all of them fails with :class:`FeedError`
        instead of leaving the output short.
        """
        try:
            if not self.train_mode:
                self._check_answered()
            else:
                unread = self._left_unread()
                if unread:
                    print(
                        f"sparktf: main_fn returned after {self.rows_fed:,} rows and left its "
                        f"share unread: {unread}; those rows were not trained on. Read until "
                        "feed.should_stop() (with to_dataset: as many epochs as train()'s "
                        f"num_epochs={self.config.num_epochs}), or call feed.terminate() "
                        "where stopping early is meant",
                        file=sys.stderr,
                        flush=True,
                    )
                if self._exchange is not None and not self._terminated and self._bound.final:
                    self._exchange.finish()  # this node's surplus rows reach their takers
        finally:
            self._release()

    def _left_unread(self) -> str | None:
        """What of its share a training main_fn that returned without ``terminate()`` and
        before ``should_stop()`` is known to have left: the rest of the batch in hand and the
        epochs not started (None if nothing is known to be left: a consumer that took exactly
        its rows without asking for more has not seen the end, and owes nothing)."""
        if self._terminated or self._stopped:
            return None
        left = []
        started = self._delivered > 0  # the current epoch (should_stop() may have looked in)
        if self._chunk is not None and started:
            rest = batches.rows(self._chunk) - self._chunk_pos
            if self._equalizing:
                rest = self._bound.allows(self._delivered, rest)
            if rest > 0:
                left.append(f"at least {rest:,} more rows of epoch {self._epoch + 1}")
        first = self._epoch + (2 if started else 1)  # the first epoch not started, from 1
        later = self.config.num_epochs - first + 1
        if later > 0 and (self.rows_fed > 0 or self._chunk is not None):  # a share with rows
            which = f"epoch {first}" if later == 1 else f"epochs {first}-{first + later - 1}"
            left.append(f"{which} of {self.config.num_epochs} not started")
        return ", ".join(left) or None

    def _check_answered(self) -> None:
        stream = self._stream
        if not self._stream_done:
            raise FeedError(
                f"main_fn returned (or called terminate()) after reading {self.rows_fed} of "
                f"this node's {stream.rows if stream.rows is not None else 'more'} "
                "input rows; inference needs one output per row: read until "
                "feed.should_stop() and call feed.batch_results() for every batch"
            )
        if self.results_sent != stream.received:
            raise FeedError(
                f"main_fn sent {self.results_sent} outputs for {stream.received} "
                "input rows; call feed.batch_results() with one output per row"
            )
        stream.send(
            feedwire.RESULTS_END,
            json.dumps({"rows": stream.received, "results": self.results_sent}).encode(),
        )

    def _release(self) -> None:
        if self._equalizing and self._stopped and not self._terminated:
            # Count exactly what equalization held back: the reader drains what is left.
            self._stream.ended.wait(self.config.feed_timeout)
        self._terminated = True
        self._stream.close()
        if self._exchange is not None:
            self._exchange.close()
        self._stream.close_spool()

    def to_dataset(self, batch_size: int, output_signature: Any = None) -> Any:
        """A ``tf.data.Dataset`` of this node's batches for one epoch per iteration.

        Iterate it once per epoch (``model.fit(ds, epochs=num_epochs)``). Elements are dicts of
        column -> tensor for a DataFrame, and for an RDD of dicts (key -> tensor); for an RDD
        of tuples/arrays a tuple or a tensor. Give ``output_signature`` or let it be read from
        the first batch. Auto-sharding is off: the data already is
        this node's share.

        **Batch sizes.** What ``batch_size`` means depends on who consumes the dataset:

        - ``MultiWorkerMirroredStrategy`` (``model.fit`` or ``experimental_distribute_dataset``):
          give the **global** batch size. TensorFlow treats each element as a global batch and
          splits it across the replicas in sync, so every node takes
          ``batch_size / num_replicas`` of its own rows per step, a step consumes
          ``batch_size`` rows over the cluster, and an epoch of ``N`` rows is about
          ``N / batch_size`` steps. Giving ``batch_size // num_workers`` instead halves the
          global batch and doubles the steps.
        - A single-worker or plain model, or your own loop over the dataset: the batch is what
          that node trains on per step (its per-node batch).
        - Asynchronous parameter-server training (``tf.compat.v1``, each worker its own steps):
          per-worker batch; use ``next_batch`` directly if you prefer.
        - ``ParameterServerStrategy`` cannot consume a feed: its input pipeline runs inside the
          workers' TensorFlow runtime (use InputMode.TENSORFLOW).

        With equalization (the default for ``cluster.train``) every node holds the same rows per
        epoch, so every node takes the same number of steps.
        """
        from sparktf.node.feed import dataset

        return dataset.build(self, batch_size, output_signature)

"""InputMode.SPARK, inside the TF process: the data feed over this node's partition.

``ctx.get_data_feed()`` returns a :class:`DataFeed`. Its first epoch streams from the node's
barrier task over a local socket (:mod:`sparktf.common.feedwire`) through a bounded read-ahead
queue, so a slow consumer slows the Spark side down; with ``num_epochs > 1`` the frames are
also spooled, as received, to a file in the node's private directory, and later epochs stream
that file back frame by frame (memory holds the read-ahead, not the share) instead of
recomputing the Spark lineage.

Synchronous training needs every worker to take the same number of steps. With ``equalize``,
every feed reports the rows it has received to the driver, which sends each training node what
changes its limit: the fewest rows any *other* node reported (and the bound, the fewest rows any
training node is known to have, once it is final or some share has ended). A feed never hands
out a row beyond the smaller of that and its own count (fresh, without waiting for its own
report to come back), so no worker can get ahead of data another worker will never have, and
none waits on a peer that waits on it. Once every partition has ended, the bound is final: each
epoch delivers exactly that many rows, and the rows beyond it are held back
(``rows_held_back``). With ``exchange`` (equalizing, but for ``rebalance=False``) the bound is
final only once every partition has ended, and if the shares are unequal (fed as they are, or
dealt out by the driver: up to a row per input partition apart) it comes with a plan that
sends the surplus rows from node to node (:mod:`~sparktf.node.feed.exchange`): only
``total % trainers`` rows an epoch are held back.

The parts, each a module:

- :mod:`~sparktf.node.feed.stream`: epoch 1, frames from the barrier task, the read-ahead
  queue, and the progress reports that equalization needs;
- :mod:`~sparktf.node.feed.sparkstream`: epoch 1 of an RDD read from the Spark worker's own
  socket, which the barrier task passes on instead of forwarding every byte;
- :mod:`~sparktf.node.feed.spool`: the frames kept on local disk, replayed for later epochs;
- :mod:`~sparktf.node.feed.equalize`: the driver's bound and the wait for it (pure threading);
- :mod:`~sparktf.node.feed.exchange`: rows moved between nodes to equalize shares fed as they
  are (a listener for rows taken, the sending of rows given);
- :mod:`~sparktf.node.feed.batches`: chunks (Arrow record batches or lists of RDD elements)
  sliced and assembled into the batches ``next_batch`` returns, and ``tf.data`` signatures;
- :mod:`~sparktf.node.feed.datafeed`: :class:`DataFeed`, the consumer's API over the rest.
- :mod:`~sparktf.node.feed.dataset`: the ``tf.data.Dataset`` over a feed (``to_dataset``);
- :mod:`~sparktf.node.feed.reports`: the progress reports to the driver, held back while
  another node holds the bound;
- :mod:`~sparktf.node.feed.results`: inference outputs (``batch_results``) as one per row.

This package never imports pyspark; pyarrow and numpy are imported when a feed is created, and
tensorflow only by :meth:`DataFeed.to_dataset`.

Modules:

- ``batches``: Chunks and batches: what the feed holds and hands out
- ``datafeed``: ``DataFeed``: the consumer's API over this node's share
- ``dataset``: The ``tf.data.Dataset`` over a node's ``DataFeed``
- ``equalize``: The feed bound as a node sees it: how many rows of an epoch every training node takes
- ``exchange``: Rows moved between training nodes after the first pass
- ``reports``: A node's progress reports to the driver while its feed is equalized
- ``results``: What ``DataFeed.batch_results`` takes: one output per input row
- ``sparkstream``: Epoch 1 of an RDD partition read straight from Spark's socket
- ``spool``: Frames kept on local disk: a node's share for the epochs after the first
- ``stream``: Epoch 1: this node's partition from its barrier task, over a local socket
- ``unpickle``: ``pickle.loads`` for the feed's RDD elements, numpy arrays rebuilt in one call
"""

from sparktf.errors import FeedError
from sparktf.node.feed.batches import column_to_numpy
from sparktf.node.feed.datafeed import DataFeed
from sparktf.node.feed.equalize import FeedBound

__all__ = ["DataFeed", "FeedBound", "FeedError", "column_to_numpy"]

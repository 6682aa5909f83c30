"""A barrier task's side of the feed wire, for tests that run a real ``DataFeed`` without Spark."""

import json
import socket
import threading
import time

from sparktf.common import feedwire


def serve_partition(path, frames, delay=0.0, before_end=None):
    """Listen on the Unix socket ``path``; send ``frames`` ((kind, payload, rows) each) to the
    feed that connects (``delay`` seconds before each: a slow Spark side), then (after
    ``before_end()`` returns, if given) the end of the partition, and wait until the feed
    closes."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def send():
        conn, _ = srv.accept()
        rows = 0
        try:
            for kind, payload, n in frames:
                if delay:
                    time.sleep(delay)
                feedwire.send_frame(conn, kind, payload)
                rows += n
            if before_end is not None:
                before_end()
            feedwire.send_frame(conn, feedwire.END, json.dumps({"rows": rows}).encode())
            while conn.recv(1 << 16):  # until the feed closes
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass  # the feed closed before the end, as the barrier task allows
        finally:
            conn.close()
            srv.close()

    threading.Thread(target=send, daemon=True).start()
    return path

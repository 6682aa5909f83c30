"""framework='horovod': a node other than the chief waits for the chief's rendezvous server
before ``hvd.init()``, which gives up on a refused connection within 1.5 s
(sparktf/node/horovod_env.py). Real sockets on loopback: the chief's port held as sparktf holds
it (bound, not listening), then taken by a listener, as Horovod's HTTP server takes it. No
Horovod, no TensorFlow."""

import socket
import threading
import time

import pytest

from sparktf.common import ports
from sparktf.errors import ClusterTimeoutError
from sparktf.node import horovod_env as horovod


def test_a_node_waits_for_the_chief_that_starts_listening_later():
    with ports.PortReservation("127.0.0.1") as held:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

        def chief_starts_late():
            time.sleep(1.0)
            listener.bind(("127.0.0.1", held.port))  # beside the reservation
            listener.listen()

        chief = threading.Thread(target=chief_starts_late)
        chief.start()
        try:
            started = time.monotonic()
            horovod.wait_for(("127.0.0.1", held.port), timeout=60)
            assert time.monotonic() - started >= 0.9  # refused until the chief listened
        finally:
            chief.join()
            listener.close()


def test_a_chief_that_never_listens_fails_the_node_saying_where_and_what_to_change():
    with ports.PortReservation("127.0.0.1") as held:
        with pytest.raises(ClusterTimeoutError) as info:
            horovod.wait_for(("127.0.0.1", held.port), timeout=0.5)
    text = str(info.value)
    assert f"rendezvous server at 127.0.0.1:{held.port} did not answer within 0.5s" in text
    assert "spark.sparktf.reservationTimeout" in text


def test_gloo_listens_on_the_interface_of_the_nodes_own_address():
    assert horovod.interface_of("127.0.0.1") == "lo"
    assert horovod.interface_of("192.0.2.1") is None  # TEST-NET-1: no interface here

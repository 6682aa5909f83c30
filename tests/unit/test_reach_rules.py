"""sparktf.node.reach without sockets: which peers a node tries, when silence fails it, and
what the error says (the real connections: tests/sockets/test_reach_dropped.py)."""

import threading

from sparktf.node import reach

SPEC = {"chief": ["h1:1"], "worker": ["h2:2", "h3:3"], "ps": ["h4:4"]}


def test_a_node_tries_every_other_node():
    assert reach.peers(SPEC, "worker:0") == {"chief:0": "h1:1", "worker:1": "h3:3", "ps:0": "h4:4"}


def test_only_silence_for_the_whole_bound_fails():
    asked = []

    def answer(address, timeout):
        asked.append(address)
        return address != "h4:4"  # the ps's packets are dropped

    silent = reach.unreachable(reach.peers(SPEC, "chief:0"), bound=0.3, answer=answer)
    assert silent == {"ps:0": "h4:4"}
    assert asked.count("h2:2") == 1  # an answer once is enough: never asked again


def test_a_peer_that_answers_late_is_not_silent():
    tries = {"n": 0}

    def answer(address, timeout):
        tries["n"] += 1
        return tries["n"] > 2  # dropped twice (a firewall rule being opened), then answers

    assert reach.unreachable({"ps:0": "h4:4"}, bound=5, answer=answer) == {}


def test_a_stopped_job_reports_nothing():
    stop = threading.Event()
    stop.set()
    assert (
        reach.unreachable({"ps:0": "h4:4"}, bound=0.2, stop=stop, answer=lambda a, t: False) == {}
    )


def test_the_message_names_the_peer_and_the_setting():
    text = reach.describe("worker:0", {"ps:0": "10.0.0.4:41234"}, 30, None)
    assert "worker:0 cannot reach ps:0 at 10.0.0.4:41234: no answer in 30s" in text
    assert "spark.sparktf.portRange=LO-HI" in text
    ranged = reach.describe("worker:0", {"ps:0": "10.0.0.4:40001"}, 30, "40000-40099")
    assert "spark.sparktf.portRange=40000-40099: open that range" in ranged

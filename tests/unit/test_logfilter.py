"""TensorFlow's native start-up chatter is recognised; everything a user should see is not."""

import pytest

from sparktf.common.logfilter import is_startup_chatter

CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795384432.272370   24967 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795384392.414278   24672 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
    "with the appropriate compiler flags.",
    "E0000 00:00:1795384396.747520   24672 cuda_platform.cc:52] failed call to cuInit: "
    "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "2026-11-22 21:53:46.123456: I tensorflow/core/util/port.cc:153] oneDNN custom operations "
    "are on.",
    "W0000 00:00:1795384396.1 24672 grpc_server_lib.cc:1] Started server with target: grpc://",
]
KEPT = [
    "Epoch 1/12",
    "63/63 - 3s - loss: 0.9292 - accuracy: 0.7160",
    "E0000 00:00:1795384396.747520   24672 collective_ops.cc:9] Collective ops is aborted",
    "F0000 00:00:1795384396.747520   24672 op_kernel.cc:9] Check failed: x",
    "Traceback (most recent call last):",
    "I0000 is how a user's own line may start",
    "",
]


@pytest.mark.parametrize("line", CHATTER)
def test_startup_chatter_is_recognised(line):
    assert is_startup_chatter(line)


@pytest.mark.parametrize("line", KEPT)
def test_what_a_user_needs_is_kept(line):
    assert not is_startup_chatter(line)


def test_the_continuation_of_tensorflows_stragglers_line_is_chatter():
    """TensorFlow's coordination service logs ``Example stragglers:`` and, on a line of its
    own, a task name: the console showed ``[chief:0] /job:worker/replica:0/task:0``."""
    assert is_startup_chatter("/job:worker/replica:0/task:0")
    assert not is_startup_chatter("/job:worker/replica:0/task:0 finished epoch 3")


def test_the_second_line_of_a_hidden_warning_is_hidden_and_of_a_shown_error_shown(capsys):
    """A new user's trial (sync SGD's end): the console hid TensorFlow's W-line but printed its
    second line, ``\\t [[{{node ...}}]] [type.googleapis.com/...]``, alone."""
    from sparktf.driver.console import Console

    console = Console(log_to_driver=True)
    lines = [
        ("ps:0", "W0000 00:00:1.2   77 local_rendezvous.cc:412] Local rendezvous is aborting"),
        ("ps:0", "\t [[{{node sync_replicas/TakeGradient_3}}]] [type.googleapis.com/x='']"),
        ("ps:0", "E0000 00:00:1.3   77 session.cc:1] Something real failed"),
        ("ps:0", "\t [[{{node train/apply}}]]"),
        ("ps:0", "step 3"),
        ("ps:0", "    indented output of the user's own"),
    ]
    for node, line in lines:
        console.node_line(node, "stderr", line)
    shown = capsys.readouterr().err.splitlines()
    assert shown == [
        "[ps:0] E0000 00:00:1.3   77 session.cc:1] Something real failed",
        "[ps:0] \t [[{{node train/apply}}]]",
        "[ps:0] step 3",
        "[ps:0]     indented output of the user's own",
    ]

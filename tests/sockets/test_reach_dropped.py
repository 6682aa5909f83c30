"""sparktf.node.reach over real sockets in a private network namespace (``unshare -n``), where
an nftables rule drops every packet to one port, as a firewall between hosts does: that port
is silent (a failure within the bound), a port with nothing listening is refused (reachable),
and a listening one accepts."""

import json
import shutil
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, socket, subprocess, sys
sys.path.insert(0, sys.argv[1])
from sparktf.node import reach
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
rules = "add table inet t\nadd chain inet t in { type filter hook input priority 0; }\n"
rules += "add rule inet t in tcp dport 45001 drop\n"
subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
listening = socket.socket(); listening.bind(("127.0.0.1", 45003)); listening.listen()
targets = {"ps:0": "127.0.0.1:45001", "worker:1": "127.0.0.1:45002", "chief:0": "127.0.0.1:45003"}
print(json.dumps(reach.unreachable(targets, bound=3, try_timeout=1)))
"""

needs_nft_netns = pytest.mark.skipif(
    shutil.which("unshare") is None
    or shutil.which("nft") is None
    or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0,
    reason="needs unshare -n (root) and nft (Debian's nftables; .ci/run installs it)",
)


@needs_nft_netns
def test_a_dropped_port_is_silent_and_a_refused_one_reachable():
    root = __import__("os").path.dirname(
        __import__("os").path.dirname(__import__("os").path.dirname(__file__))
    )
    out = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", SCRIPT, root],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"ps:0": "127.0.0.1:45001"}

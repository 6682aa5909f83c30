"""A port claim (spark.sparktf.portRange) is scoped as the port is: to the host's network
namespace. A claim held here does not stop a job in another namespace (a container, another
"host" on this machine) from taking the same port number there, and within one namespace it
does. Real sockets; the other namespace is the test's own (``unshare -n``)."""

import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

from sparktf.common.ports import PortRange, PortReservation
from sparktf.errors import PortRangeError

CLAIM = textwrap.dedent(
    """\
    import subprocess, sys
    from sparktf.common.ports import PortRange, PortReservation
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    port = int(sys.argv[1])
    r = PortReservation("127.0.0.1", PortRange(port, port))
    print("claimed", r.port)
    r.release()
    """
)

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None
    or shutil.which("ip") is None
    or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0,
    reason="needs unshare -n and ip (a private network namespace)",
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_claim_binds_its_own_network_namespace_only():
    port = free_port()
    held = PortReservation("127.0.0.1", PortRange(port, port))
    try:
        with pytest.raises(PortRangeError):  # here: taken
            PortReservation("127.0.0.1", PortRange(port, port))
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run(
            ["unshare", "-n", sys.executable, "-c", CLAIM, str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=root),
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["claimed", str(port)]  # there: free
    finally:
        held.release()

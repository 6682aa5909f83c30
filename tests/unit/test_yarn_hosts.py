"""bin/yarn_hosts.py's checks that need no root and make nothing: why the multihost tier
skips, the names and subnet it would use, and a fault verb's refusal of an unknown host."""

import ipaddress
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bin"))
import yarn_hosts


def test_without_root_the_tier_is_told_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert yarn_hosts.usable() == "needs root (ip netns, veth pairs and a bridge)"


def test_without_ip_the_tier_is_told_why(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(yarn_hosts.shutil, "which", lambda name: None)
    assert yarn_hosts.usable() == "no `ip` (iproute2) on PATH"


def test_names_fit_linux_interface_names_and_differ_by_state_dir():
    a, b = yarn_hosts.tag_of("/tmp/a"), yarn_hosts.tag_of("/tmp/b")
    assert a != b and a.startswith("stf") and len(a) == 9
    assert len(f"{a}br") <= 15 and len(f"{a}w9") <= 15  # IFNAMSIZ - 1


def test_the_subnet_avoids_every_address_and_route_of_the_machine(monkeypatch):
    tag = yarn_hosts.tag_of("/tmp/a")
    machine = {"addr": ""}

    class Out:
        @property
        def stdout(self):
            return machine["addr"]

    monkeypatch.setattr(yarn_hosts, "ip", lambda *args, check=True: Out())
    first = yarn_hosts.pick_subnet(tag)  # a machine with no address
    machine["addr"] = f"inet {first.network_address + 5}/16 scope global"
    chosen = yarn_hosts.pick_subnet(tag)
    assert not chosen.overlaps(ipaddress.ip_network(f"{first.network_address}/16", strict=False))
    assert chosen.prefixlen == 24 and chosen.subnet_of(ipaddress.ip_network("10.0.0.0/8"))


def test_a_fault_on_an_unknown_host_names_the_hosts():
    net = {"hosts": [{"name": "worker1"}, {"name": "worker2"}]}
    with pytest.raises(
        yarn_hosts.HostsError, match="no worker host 'worker9'; the hosts are worker1, worker2"
    ):
        yarn_hosts.host_of(net, "worker9")

"""bin/gpu-discovery.sh against a stand-in nvidia-smi (tests/helpers/standin: the test machines
have no GPU; the script runs unchanged). What container runtimes and schedulers put in
CUDA_VISIBLE_DEVICES - indices, GPU UUIDs (whole or a unique prefix), MIG identifiers - maps to
the addresses nvidia-smi lists, in CUDA's order, stopping where CUDA stops (the first entry it
cannot resolve)."""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bin", "gpu-discovery.sh")
STANDIN = os.path.join(ROOT, "tests", "helpers", "standin")
UUID = "GPU-5a1d0000-0000-4000-8000-00000000000{}".format
MIG = "MIG-7b2e0000-0000-4000-8000-0000000000{}{}".format


def discover(visible=None, standin=True, **extra):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    path = "/usr/bin:/bin"
    env["PATH"] = f"{STANDIN}:{path}" if standin else path
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    env.update(extra)
    out = subprocess.run([SCRIPT], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["name"] == "gpu"
    return found["addresses"]


@pytest.mark.parametrize(
    "visible, expected",
    [
        (None, ["0", "1", "2", "3"]),
        ("", []),  # CUDA: no device
        ("1,3", ["1", "3"]),
        (" 3 , 0 ", ["3", "0"]),
        (UUID(2), ["2"]),  # a container runtime's way
        (f"{UUID(3)},{UUID(1)}", ["3", "1"]),
        ("GPU-5a1d0000," + UUID(0), []),  # a prefix of every UUID is invalid: CUDA stops
        ("GPU-5a1d0000-0000-4000-8000-000000000002", ["2"]),
        ("1,7,2", ["1"]),  # CUDA stops at the first entry it cannot resolve
        ("1,1", ["1"]),
        ("GPU-ffff", []),
    ],
)
def test_cuda_visible_devices_maps_to_nvidia_smi_indices(visible, expected):
    assert discover(visible) == expected


def test_a_unique_uuid_prefix_is_accepted_as_cuda_accepts_it():
    assert discover("GPU-5a1d0000-0000-4000-8000-0000000000", STANDIN_GPUS="1") == ["0"]
    assert discover("GPU-5a1d0000-0000-4000-8000-0000000000", STANDIN_GPUS="2") == []


def test_mig_devices_are_addresses_of_their_own():
    assert discover(f"{MIG(3, 1)}", STANDIN_MIG="3") == [MIG(3, 1)]
    assert discover(f"{MIG(3, 0)},{MIG(3, 1)}", STANDIN_MIG="3") == [MIG(3, 0), MIG(3, 1)]
    assert discover(MIG(3, 0)) == []  # no such MIG device on this machine


def test_no_nvidia_smi_means_no_gpu():
    assert discover(standin=False) == []
    assert discover("0", standin=False) == []

"""Test actions run without network: Bazel's sandbox gives them a namespace with loopback only.

Checked from inside the test process, without sending a packet to any non-loopback address:
  - /proc/net/dev (this process's network namespace) lists the loopback interface and nothing
    else, so there is no route anywhere else;
  - only then, a DNS lookup of a package index name fails (the resolver is unreachable);
  - the torch_test macro's offline switches for model hubs are set.
Only meaningful under `bazel test` (which sets TEST_TARGET); elsewhere every test fails with a
message instead of passing vacuously on a host that has network.
"""

import os
import socket

import pytest

PUBLIC_NAME = "pypi.org"


@pytest.fixture(autouse=True)
def under_bazel_test():
    if not os.environ.get("TEST_TARGET"):
        pytest.fail(
            "run me with `tools/bazel test //test_utils/tests:test_offline`: outside Bazel's "
            "sandbox the host's network is visible, so this check would mean nothing",
            pytrace=False,
        )


def network_interfaces() -> list[str]:
    # Two header lines, then "  name: counters..." per interface of this namespace.
    with open("/proc/net/dev") as f:
        return sorted(line.split(":", 1)[0].strip() for line in f.readlines()[2:])


def test_only_loopback_interface():
    assert network_interfaces() == ["lo"], (
        "the test action sees network interfaces besides loopback; is "
        "--sandbox_default_allow_network=false in effect (and the linux-sandbox in use)?"
    )


def test_public_name_does_not_resolve():
    # A lookup may send a query to the configured resolver: only try it once no interface
    # but loopback exists, where that query cannot leave the namespace.
    if network_interfaces() != ["lo"]:
        pytest.fail("not attempted: the action has network interfaces besides loopback")
    with pytest.raises(OSError):  # socket.gaierror is an OSError
        socket.getaddrinfo(PUBLIC_NAME, 443, proto=socket.IPPROTO_TCP)


def test_loopback_still_works():
    # Multi-process tests rendezvous and talk over loopback (gloo): it must stay usable.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            peer, _ = server.accept()
            with peer:
                client.sendall(b"ping")
                assert peer.recv(4) == b"ping"


@pytest.mark.parametrize("name", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_model_hubs_are_offline(name):
    assert os.environ.get(name) == "1", f"{name} must be 1 (set by torch_test's COMMON_ENV)"

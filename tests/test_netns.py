"""tests/netns.py: hosts on a private link reach each other by address, a cut link drops
their packets until restored, and everything is removed even when the test fails."""

import subprocess
import sys

import pytest
from netns import HostProcesses, PrivateNetwork, namespaces_unavailable

_WHY_NOT = namespaces_unavailable()
pytestmark = pytest.mark.skipif(_WHY_NOT is not None,
                                reason=f"cannot create network namespaces: {_WHY_NOT}")

# Host 1 connects to host 0's port 5000; prints "ok" or the error's class.
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    socket.create_connection((sys.argv[1], 5000), timeout=1.5).close()\n"
           "    print('ok')\n"
           "except OSError as error:\n"
           "    print(type(error).__name__)\n")
SERVE = ("import socket\n"
         "server = socket.socket(); server.bind(('0.0.0.0', 5000)); server.listen()\n"
         "print('listening', flush=True)\n"
         "while True:\n"
         "    server.accept()[0].close()\n")


def _connect(net, address):
    result = subprocess.run(net.command(1, [sys.executable, "-c", CONNECT, address]),
                            capture_output=True, text=True, timeout=60)
    return result.stdout.strip()


def _links():
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def test_two_hosts_reach_each_other_a_cut_link_drops_packets_until_restored():
    with PrivateNetwork(hosts=2) as net:
        assert net.address(0) != net.address(1)
        assert net.address(0).rsplit(".", 1)[0] == net.address(1).rsplit(".", 1)[0]
        server = HostProcesses(net, [[sys.executable, "-c", SERVE]])
        server.wait_for("listening", timeout=60)
        assert _connect(net, net.address(0)) == "ok"
        # Only the private link: host 0 is not reachable on the root namespace's loopback.
        assert _connect(net, "127.0.0.1") == "ConnectionRefusedError"
        net.cut(1)
        assert _connect(net, net.address(0)) == "TimeoutError"  # dropped, not refused
        net.restore(1)
        assert _connect(net, net.address(0)) == "ok"
        names = list(net.namespaces)
        assert net.bridge in _links()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(name in listed for name in names)
    assert net.bridge not in _links() and server.processes[0].poll() is not None


def test_everything_is_removed_when_the_block_fails_and_names_differ_per_network():
    with pytest.raises(KeyboardInterrupt):
        with PrivateNetwork(hosts=2) as net, PrivateNetwork(hosts=1) as other:
            assert set(net.namespaces).isdisjoint(other.namespaces)
            assert net.bridge != other.bridge and net.subnet != other.subnet
            raise KeyboardInterrupt
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(name in listed for name in net.namespaces + other.namespaces)
    assert net.bridge not in _links() and other.bridge not in _links()

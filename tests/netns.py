"""Several "hosts" on one machine for tests: network namespaces on a private bridge.

Each host is a network namespace (``ip netns``) with its own address on a private link:
a veth pair joins it to a bridge in the root namespace, which has no address itself, so
nothing outside the bridge reaches the hosts and they reach nothing else. The filesystem
is shared: a run directory under ``tmp_path`` is seen by every host, as on a cluster with a
shared filesystem. Names carry the test process's id and a counter, so parallel runs (or
several networks in one run) do not clash. Everything is removed on exit, on failure and
on KeyboardInterrupt (and at interpreter exit if a `with` block was never left).

Usage::

    skip_reason = namespaces_unavailable()   # None where `ip netns add` works
    with PrivateNetwork(hosts=2) as net:
        process = net.popen(0, ["python3", "-c", "..."])   # runs in host 0
        net.cut(1)        # host 1's link goes down (packets are dropped, no error)
        net.restore(1)
        # One command per host, output captured line by line while they run:
        run = HostProcesses(net, [argv_0, argv_1], env=..., cwd=...)
        run.wait_for("Epoch 3/", index=0); net.cut(1); codes = run.finish(timeout=120)
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import List, Optional, Sequence

_COUNTER = itertools.count()
_LIVE: List["PrivateNetwork"] = []


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30)


@functools.lru_cache(maxsize=None)
def namespaces_unavailable() -> Optional[str]:
    """Why network namespaces cannot be made here (a skip reason), or None if they can.

    Probed once per test process: create a namespace and a veth pair, delete them.
    """
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    name = f"tfaprobe{os.getpid()}"
    try:
        made = _ip("netns", "add", name, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip() or made.returncode}"
        veth = _ip("link", "add", f"tfp{os.getpid()}", "type", "veth", "peer", "name",
                   f"tfq{os.getpid()}", "netns", name, check=False)
        if veth.returncode != 0:
            return f"cannot create a veth pair: {veth.stderr.strip() or veth.returncode}"
        return None
    except (OSError, subprocess.SubprocessError) as error:
        return f"cannot run `ip`: {error}"
    finally:
        _ip("link", "del", f"tfp{os.getpid()}", check=False)
        _ip("netns", "del", name, check=False)


class PrivateNetwork:
    """`hosts` network namespaces, host i at ``address(i)``, on one private bridge.

    Args:
        hosts: How many hosts (namespaces).
    """

    def __init__(self, hosts: int = 2):
        if not 1 <= hosts <= 250:
            raise ValueError(f"hosts must be 1-250; got {hosts}")
        self.hosts = hosts
        # Interface names have at most 15 characters: "tfb" + 8 hex digits + 1-3 more.
        tag = f"{os.getpid() & 0xFFFFF:05x}{next(_COUNTER) & 0xFFF:03x}"
        self.tag = tag
        self.bridge = f"tfb{tag}"
        self.namespaces = [f"tfa{tag}-{i}" for i in range(hosts)]
        self.veths = [f"tfv{tag}{i:x}" for i in range(hosts)]  # root-namespace ends
        # A subnet of 10.0.0.0/8 from the tag: separate bridges never route to each other
        # (no address in the root namespace), distinct subnets only make logs unambiguous.
        value = int(tag, 16)
        self.subnet = f"10.{(value >> 8) & 0xFF}.{value & 0xFF}"
        self.processes: List[subprocess.Popen] = []
        self._up = False

    def address(self, index: int) -> str:
        """Host `index`'s IPv4 address."""
        return f"{self.subnet}.{index + 1}"

    def __enter__(self) -> "PrivateNetwork":
        _LIVE.append(self)
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def _create(self) -> None:
        self._up = True
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        for i, (namespace, veth) in enumerate(zip(self.namespaces, self.veths)):
            _ip("netns", "add", namespace)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
                namespace)
            _ip("link", "set", veth, "master", self.bridge)
            _ip("link", "set", veth, "up")
            _ip("-n", namespace, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", namespace, "link", "set", "lo", "up")

    def command(self, index: int, argv: Sequence[str]) -> List[str]:
        """`argv` as a command line that runs inside host `index`."""
        return ["ip", "netns", "exec", self.namespaces[index], *map(str, argv)]

    def popen(self, index: int, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Starts `argv` inside host `index` (killed at close if still running)."""
        kwargs.setdefault("start_new_session", True)
        process = subprocess.Popen(self.command(index, argv), **kwargs)
        self.processes.append(process)
        return process

    def cut(self, index: int) -> None:
        """Takes host `index`'s link down: its packets are dropped, no error is returned."""
        _ip("link", "set", self.veths[index], "down")

    def restore(self, index: int) -> None:
        """Brings host `index`'s link back up."""
        _ip("link", "set", self.veths[index], "up")
        _ip("-n", self.namespaces[index], "link", "set", "eth0", "up")

    def close(self) -> None:
        """Kills what runs in the hosts, deletes the namespaces and the bridge; idempotent."""
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self._up:
            for namespace in self.namespaces:  # anything else started inside them
                pids = _ip("netns", "pids", namespace, check=False).stdout.split()
                for pid in pids:
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            for process in self.processes:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            for veth in self.veths:  # the kernel frees a namespace's links lazily
                _ip("link", "del", veth, check=False)
            for namespace in self.namespaces:  # deleting one deletes its veth pair too
                _ip("netns", "del", namespace, check=False)
            _ip("link", "del", self.bridge, check=False)
            self._up = False
        if self in _LIVE:
            _LIVE.remove(self)


class HostProcesses:
    """One command per host of `net` (command i in host i), their output read as they run.

    Args:
        net: The `PrivateNetwork`.
        commands: One argv per host, in host order (fewer: only the first hosts).
        **popen: For `subprocess.Popen` (env, cwd); stdout and stderr are merged and read.
    """

    def __init__(self, net: PrivateNetwork, commands: Sequence[Sequence[str]], **popen):
        self.lines: List[List[str]] = [[] for _ in commands]
        self.processes = [net.popen(index, argv, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    **popen) for index, argv in enumerate(commands)]
        self._readers = [threading.Thread(target=self._read, args=(i,), daemon=True)
                         for i in range(len(commands))]
        for reader in self._readers:
            reader.start()

    def _read(self, index: int) -> None:
        for line in self.processes[index].stdout:
            self.lines[index].append(line)

    def output(self, index: Optional[int] = None) -> str:
        """Host `index`'s output so far (every host's, host by host, when None)."""
        chosen = range(len(self.lines)) if index is None else [index]
        return "".join(line for i in chosen for line in list(self.lines[i]))

    def wait_for(self, marker: str, *, index: int = 0, timeout: float = 420) -> None:
        """Waits until host `index` printed `marker` (AssertionError if it ended, or after
        `timeout` seconds: a guard against hangs, not a speed check)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.output(index):
                return
            if self.processes[index].poll() is not None and not self._readers[index].is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"{marker!r} never came:\n{self.output()[-4000:]}")

    def finish(self, *, timeout: float = 420) -> List[int]:
        """Every host's exit code once all ended (AssertionError after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        for process in self.processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                raise AssertionError(f"still running {timeout} s later:\n"
                                     f"{self.output()[-4000:]}") from None
        for reader in self._readers:
            reader.join(timeout=10)
        return [process.returncode for process in self.processes]


@atexit.register
def _close_all() -> None:
    for network in list(_LIVE):
        network.close()

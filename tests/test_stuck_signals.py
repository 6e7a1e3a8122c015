"""training/distributed/stuck_signals.py: SIGTERM and Ctrl-C stop a worker waiting for a peer that
never comes as they stop any run (it used to wait inside a TensorFlow call holding the GIL, deaf to
both until kill -9)."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml
from launch_helpers import child_env, children, kill_tree

from tfaccel.cli.tf_configs import free_ports
from tfaccel.engine.cluster_join import ClusterJoin
from tfaccel.errors import Stopped
from tfaccel.training.distributed.stuck_signals import signals_end_the_wait

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

# Generous: TensorFlow's import and the run's start on 2 loaded cores.
START_TIMEOUT = 240
WHAT = "waiting for the other workers of TF_CONFIG's cluster to join"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_the_workers_meet_raises_stopped_naming_the_absent_worker(signum):
    own, absent = free_ports(2)
    join = ClusterJoin([("worker 0", f"127.0.0.1:{own}"), ("worker 1", f"127.0.0.1:{absent}")],
                       0, poll_seconds=0.05)
    # Outer handlers: a signal that came late would not end the test session.
    late = []
    outer = {s: signal.signal(s, lambda n, f: late.append(n))
             for s in (signal.SIGINT, signal.SIGTERM)}
    before = {s: signal.getsignal(s) for s in outer}
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signum))
    timer.start()
    entered = False
    try:
        with pytest.raises(Stopped) as stopped:
            with signals_end_the_wait(what=WHAT, join=join):
                entered = True  # never: the TensorFlow call is not reached
        after = {s: signal.getsignal(s) for s in outer}
    finally:
        timer.cancel()
        for s, handler in outer.items():
            signal.signal(s, handler)
    assert late == []
    assert not entered
    assert stopped.value.signum == signum
    assert str(stopped.value) == (
        f"stopped by {signal.Signals(signum).name} while {WHAT} (worker 1 at "
        f"127.0.0.1:{absent} never joined); nothing was trained.")
    # The handlers are put back and the port is free for a next try.
    assert after == before
    with socket.create_server(("127.0.0.1", own)):
        pass


def _tiny_recipe(tmp_path):
    import numpy as np

    x = np.random.default_rng(0).normal(size=(40, 4)).astype("float32")
    np.savez(tmp_path / "blobs.npz", x_train=x, y_train=(x[:, 0] > 0).astype("int64"))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({
        "data": {"source": "arrays", "path": "blobs.npz", "validation_split_name": None},
        "model": {"name": "mlp", "params": {"hidden_units": [4]}},
        "training": {"epochs": 1, "global_batch_size": 8},
        "runtime": {"strategy": "multi_worker", "precision": "float32",
                    "tensorboard": False, "runs_dir": "runs"}}))


def _start_worker_0(tmp_path, ports):
    env = child_env(tmp_path)
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                   "task": {"type": "worker", "index": 0}})
    return subprocess.Popen([sys.executable, "-m", "tfaccel.cli", "train", "tiny.yaml"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_until(process, ready, what):
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.monotonic() < deadline, f"the worker never started {what}"
        time.sleep(0.2)


def _listening(port) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.multiworker
def test_sigterm_stops_a_worker_whose_peer_never_comes_as_it_stops_any_run(tmp_path):
    # Worker 1 is never started. Worker 0 waits for it in Python (its port listening): a
    # SIGTERM there ends it with 143 (the code a SIGTERM gives anywhere in a run), naming
    # the worker that never came, and the run directory that held only the recipe is gone.
    _tiny_recipe(tmp_path)
    ports = free_ports(2)
    process = _start_worker_0(tmp_path, ports)
    try:
        _wait_until(process, lambda: _listening(ports[0]), "waiting for its peer")
        runs = list((tmp_path / "runs").iterdir())
        assert len(runs) == 1 and (runs[0] / "recipe.yaml").is_file()
        time.sleep(1)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        kill_tree(process.pid)
    assert process.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert (f"Error: stopped by SIGTERM while {WHAT} (worker 1 at 127.0.0.1:{ports[1]} never "
            f"joined); nothing was trained. The run directory runs/{runs[0].name} held "
            "nothing yet and was removed.") in output
    assert list((tmp_path / "runs").iterdir()) == []


@pytest.mark.multiworker
@pytest.mark.cold_python  # it watches the worker's own child process (the watchdog)
def test_ctrl_c_stops_a_worker_whose_peer_left_after_meeting_it(tmp_path):
    # The rare case left to TensorFlow's wait: worker 1 meets worker 0, then dies before
    # its TensorFlow server starts. Worker 0 waits inside TensorFlow's call (the watchdog
    # process runs exactly then); Ctrl-C ends it there (130 in a shell) and the watchdog
    # removes the unstarted run directory. (SIGTERM is TensorFlow's own there: the
    # scheduler's SIGKILL after its grace period ends it, and the watchdog cleans up too.)
    _tiny_recipe(tmp_path)
    ports = free_ports(2)
    tasks = [(f"worker {i}", f"127.0.0.1:{p}") for i, p in enumerate(ports)]
    peer = threading.Thread(target=ClusterJoin(tasks, 1).wait, daemon=True)
    peer.start()
    process = _start_worker_0(tmp_path, ports)
    try:
        _wait_until(process, lambda: children(process.pid), "waiting inside TensorFlow")
        assert not peer.is_alive()
        runs = list((tmp_path / "runs").iterdir())
        time.sleep(2)  # well inside TensorFlow's wait
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        kill_tree(process.pid)
    assert process.returncode == -signal.SIGINT, output[-3000:]
    assert (f"tfaccel: stopped while {WHAT}; the run directory runs/{runs[0].name} held "
            "nothing yet and was removed.") in output
    assert list((tmp_path / "runs").iterdir()) == []

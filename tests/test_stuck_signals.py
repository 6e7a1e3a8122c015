"""training/stuck_signals.py: Ctrl-C and SIGTERM end a worker waiting for a peer that never
comes (it waited inside a TensorFlow call holding the GIL, deaf to both until kill -9)."""

import json
import signal
import subprocess
import sys
import time

import pytest
import yaml
from launch_helpers import child_env, children, kill_tree

from tfaccel.cli.launch import free_ports

# Generous: TensorFlow's import and the run's start on 2 loaded cores.
START_TIMEOUT = 240


@pytest.mark.multiworker
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_worker_whose_peer_never_comes_stops_on_a_signal_and_leaves_no_run_directory(
        tmp_path, signum):
    # SIGINT ends it at once (130 in a shell). SIGTERM is caught by TensorFlow itself during
    # that wait (its coordination agent installs a C handler that only records it), so the
    # worker goes on waiting until the SIGKILL that schedulers and `tfaccel launch` send
    # after their grace period; the run directory is removed either way.
    import numpy as np

    x = np.random.default_rng(0).normal(size=(40, 4)).astype("float32")
    np.savez(tmp_path / "blobs.npz", x_train=x, y_train=(x[:, 0] > 0).astype("int64"))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({
        "data": {"source": "arrays", "path": "blobs.npz", "validation_split_name": None},
        "model": {"name": "mlp", "params": {"hidden_units": [4]}},
        "training": {"epochs": 1, "global_batch_size": 8},
        "runtime": {"strategy": "multi_worker", "precision": "float32",
                    "tensorboard": False, "runs_dir": "runs"}}))
    ports = free_ports(2)
    env = child_env(tmp_path)
    # Worker 1 is never started.
    env["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                   "task": {"type": "worker", "index": 0}})
    process = subprocess.Popen([sys.executable, "-m", "tfaccel.cli", "train", "tiny.yaml"],
                               env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        # The watchdog process runs exactly while the worker waits for its peers.
        deadline = time.monotonic() + START_TIMEOUT
        while not children(process.pid):
            assert process.poll() is None, process.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the worker never started waiting"
            time.sleep(0.2)
        runs = list((tmp_path / "runs").iterdir())
        assert len(runs) == 1 and (runs[0] / "recipe.yaml").is_file()
        time.sleep(2)  # well inside TensorFlow's wait
        process.send_signal(signum)
        if signum == signal.SIGTERM:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                signum = signal.SIGKILL  # the scheduler's next step
                process.send_signal(signum)
        output, _ = process.communicate(timeout=60)
    finally:
        kill_tree(process.pid)
    # Ended by the signal itself: a shell reports 130 (SIGINT) or 137 (SIGKILL).
    assert process.returncode == -signum, output[-3000:]
    assert (f"tfaccel: stopped while waiting for the other workers of TF_CONFIG's cluster "
            f"to join; the run directory runs/{runs[0].name} held nothing yet and was "
            "removed.") in output
    assert list((tmp_path / "runs").iterdir()) == []

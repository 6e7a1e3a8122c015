"""A parameter-server cluster across network namespaces: the chief, a ps and 2 workers each a
"host" of its own (tests/netns.py), started with one `tfaccel launch --ps 1 --hosts ...
--index I` per host as on several machines. It trains to the exact step count; a worker's
link cut mid-epoch is named by HOST:PORT and the run completes without it, every step
counted once; a parameter server's link cut stops the run naming it, and `--resume` after
the link is restored finishes the run.

Real TensorFlow processes (4 per launch): marked `slow` and `multiworker` like
tests/test_netns_hosts.py; the link cuts also `heavy` (30-50 s each on 2 loaded cores, the
plain run about 22 s); every wait is under a timeout; skipped where namespaces cannot be made.
"""

import json
import time

import pytest
from launch_helpers import (
    PS_STEPS_PER_EPOCH,
    TIMEOUT_SECONDS,
    launch_on_hosts,
    parameter_server_recipe,
)
from netns import PrivateNetwork, namespaces_unavailable

_WHY_NOT = namespaces_unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.multiworker,
              pytest.mark.skipif(_WHY_NOT is not None,
                                 reason=f"cannot create network namespaces: {_WHY_NOT}")]

PORT = 2222  # each host is a namespace of its own: the port is free on all of them
CHIEF, PS, W0, W1 = range(4)  # host order = launch --hosts order: chief, ps..., workers...
# A silent peer fails the chief's calls after runtime.peer_timeout (10 s by default: gRPC
# keepalive pings); the chief then stops or carries on within seconds. Generous on 2 shared
# cores: not a speed check, a hang fails the test.
STOP_BOUND_SECONDS = 120


@pytest.fixture
def network():
    """Four hosts on a private link, removed after the test whatever happens."""
    with PrivateNetwork(hosts=4) as net:
        yield net


def _launch(net, train_args, *, tmp_path):
    """`tfaccel launch --ps 1 --hosts ... --index I -- TRAIN_ARGS` on every host of `net`."""
    return launch_on_hosts(net, train_args, port=PORT, tmp_path=tmp_path,
                           options=["--ps", "1"])


def _cut_in_epoch_2(net, host, *, epochs, tmp_path):
    """A run of `epochs` on every host, `host`'s link cut once epoch 1 is done (epoch 2's
    steps in flight); ``(launch, run_dir, when it was cut)``."""
    run_dir = tmp_path / "runs" / "cut"
    recipe = parameter_server_recipe(tmp_path, epochs=epochs)
    launch = _launch(net, ["train", recipe, "--run-dir", run_dir], tmp_path=tmp_path)
    launch.wait_for(f"[chief] tfaccel: epoch 1/{epochs}", index=CHIEF, timeout=TIMEOUT_SECONDS)
    net.cut(host)
    return launch, run_dir, time.monotonic()


def _read(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return summary, [(e["epoch"], e["step"]) for e in epochs]


@pytest.mark.heavy  # outside the 15-minute CI budget: ~20 s; the same cluster on 127.0.0.1 is test_launch_parameter_server's
def test_four_hosts_train_to_the_exact_step_count(network, tmp_path):
    run_dir = tmp_path / "runs" / "four-hosts"
    recipe = parameter_server_recipe(tmp_path, epochs=2)
    launch = _launch(network, ["train", recipe, "--run-dir", run_dir], tmp_path=tmp_path)
    assert launch.finish(timeout=TIMEOUT_SECONDS) == [0, 0, 0, 0], launch.output()[-4000:]
    assert "[launch] chief 0 of a cluster of 4 (" + ", ".join(
        f"{network.address(i)}:{PORT}" for i in range(4)) in launch.output(CHIEF)
    for host in (PS, W0, W1):  # each task's own launch ends once the chief is gone
        assert f"the chief ({network.address(CHIEF)}:{PORT}) is gone; stopping." in \
            launch.output(host), launch.output(host)[-2000:]
    summary, epochs = _read(run_dir)
    assert summary["status"] == "completed"
    assert summary["steps_completed"] == 2 * PS_STEPS_PER_EPOCH
    assert (summary["workers"], summary["parameter_servers"]) == (2, 1)
    assert epochs == [(1, 40), (2, 80)]


@pytest.mark.heavy
def test_a_worker_cut_mid_epoch_is_named_and_the_run_completes_counting_each_step_once(
        network, tmp_path):
    launch, run_dir, cut_at = _cut_in_epoch_2(network, W1, epochs=6, tmp_path=tmp_path)
    lost = (f"worker 1 ({network.address(W1)}:{PORT}, /job:worker/replica:0/task:1) is "
            "unreachable (TensorFlow: UnavailableError)")
    launch.wait_for(lost, index=CHIEF, timeout=STOP_BOUND_SECONDS)
    print(f"worker 1 named {time.monotonic() - cut_at:.1f} s after the cut")
    # Worker 1's own launch ends by itself: it no longer reaches the chief (tfaccel's serving
    # task stops after two unanswered probes), so it stays out after the link is back.
    assert launch.processes[W1].wait(timeout=STOP_BOUND_SECONDS) == 0
    network.restore(W1)
    assert launch.finish(timeout=TIMEOUT_SECONDS) == [0, 0, 0, 0], launch.output()[-4000:]
    chief = launch.output(CHIEF)
    assert chief.count(lost) == 1  # said once, though every closure in flight failed
    assert "[chief] tfaccel: epoch 6/6" in chief[chief.index(lost):]
    assert "Traceback" not in launch.output()
    summary, epochs = _read(run_dir)
    assert summary["status"] == "completed"
    assert summary["steps_completed"] == 6 * PS_STEPS_PER_EPOCH  # each step once
    assert epochs == [(epoch, epoch * PS_STEPS_PER_EPOCH) for epoch in range(1, 7)]
    assert summary["final_metrics"]["val_accuracy"] > 0.8  # it learned across the loss


@pytest.mark.heavy
def test_a_parameter_server_cut_stops_the_run_naming_it_and_resume_finishes_it(
        network, tmp_path):
    launch, run_dir, cut_at = _cut_in_epoch_2(network, PS, epochs=4, tmp_path=tmp_path)
    codes = launch.finish(timeout=STOP_BOUND_SECONDS)
    print(f"the chief stopped {time.monotonic() - cut_at:.1f} s after the cut")
    assert codes == [1, 0, 0, 0], launch.output()[-4000:]  # the servers end with the chief
    chief = launch.output(CHIEF)
    assert (f"[chief] Error: parameter server {network.address(PS)}:{PORT} "
            "(/job:ps/replica:0/task:0) is unreachable (TensorFlow: UnavailableError): its "
            "link is down or it stopped" in chief), chief[-4000:]
    assert f"-- train --resume {run_dir}` (`tfaccel launch --ps N --workers M`, or on each " \
        "host the same `tfaccel launch --ps N --hosts ... --index I`)" in chief
    assert "Traceback" not in launch.output()
    stopped, _ = _read(run_dir)
    assert stopped["status"] == "failed"
    assert stopped["steps_completed"] >= PS_STEPS_PER_EPOCH

    network.restore(PS)
    resumed = _launch(network, ["train", "--resume", run_dir], tmp_path=tmp_path)
    assert resumed.finish(timeout=TIMEOUT_SECONDS) == [0, 0, 0, 0], resumed.output()[-4000:]
    assert "resuming from checkpoint step-" in resumed.output(CHIEF)
    summary, epochs = _read(run_dir)
    assert summary["status"] == "completed"
    assert summary["steps_completed"] == 4 * PS_STEPS_PER_EPOCH
    assert epochs == [(epoch, epoch * PS_STEPS_PER_EPOCH) for epoch in range(1, 5)]

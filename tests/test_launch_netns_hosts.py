"""`tfaccel launch --hosts A:PORT,B:PORT --index I` on two "hosts" with their own addresses:
network namespaces on a private bridge (tests/netns.py), the run directory on the shared
filesystem. Same weights as one process; a link cut mid-run stops both workers with a
message naming the unreachable HOST:PORT, and the resumed run is exact.

Real TensorFlow processes, like tests/test_launch_multiworker.py: marked `slow` and
`multiworker`, each wait under a timeout; skipped where namespaces cannot be made.
"""

import time

import numpy as np
import pytest
from launch_helpers import (
    DEFAULT_RECIPE,
    TIMEOUT_SECONDS,
    launch_on_hosts,
    read_json,
    run_tfaccel,
    short_default_args,
)
from netns import PrivateNetwork, namespaces_unavailable

_WHY_NOT = namespaces_unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.multiworker,
              pytest.mark.skipif(_WHY_NOT is not None,
                                 reason=f"cannot create network namespaces: {_WHY_NOT}")]

PORT = 23456  # each host is a namespace of its own: the port is free on both
# The coordination service declares a peer dead after runtime.peer_timeout (5 s here)
# without a heartbeat; the launcher then ends within seconds. Generous on 2 shared cores:
# not a speed check, a hang fails the test.
STOP_BOUND_SECONDS = 120


@pytest.fixture
def network():
    """Two hosts on a private link, removed after the test whatever happens."""
    with PrivateNetwork(hosts=2) as net:
        yield net


def _launch(net, train_args, *, tmp_path):
    """`tfaccel launch --hosts ... --index I -- TRAIN_ARGS` on every host of `net`."""
    return launch_on_hosts(net, train_args, port=PORT, tmp_path=tmp_path)


def _weights(run_dir):
    import keras

    model = keras.saving.load_model(run_dir / "model.keras")
    return [w.numpy() for w in model.weights]


def _one_process(overrides, run_dir):
    import tfaccel

    return tfaccel.train(str(DEFAULT_RECIPE), overrides[1::2] + ["runtime.strategy=one_device"],
                         run_dir=str(run_dir))


def _assert_same_run(launched, single):
    pairs = list(zip(_weights(launched), _weights(single.run_dir)))
    print(f"max weight difference: {max(np.abs(a - b).max() for a, b in pairs):.2e}")
    for got, expected in pairs:
        np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(_losses(launched), [r["loss"] for r in single.epochs],
                               rtol=1e-5)


def _losses(run_dir):
    """The per-epoch training losses of metrics.jsonl, in order."""
    import json

    return [json.loads(line)["loss"] for line in
            (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.heavy  # outside the 15-minute CI budget: ~18 s; the same weights on 127.0.0.1 are test_launch_multiworker's
def test_two_hosts_end_with_the_weights_of_one_process(network, tmp_path, shapes_data_dir):
    # The assertions of test_launch_multiworker's cluster form, across two addresses.
    runs = tmp_path / "runs"
    overrides = short_default_args(shapes_data_dir, runs, "training.epochs=2",
                               "training.steps_per_epoch=3")
    launch = _launch(network, ["train", DEFAULT_RECIPE, *overrides], tmp_path=tmp_path)
    assert launch.finish(timeout=TIMEOUT_SECONDS) == [0, 0], launch.output()[-4000:]
    assert f"worker 0 of 2 ({network.address(0)}:{PORT}, {network.address(1)}:{PORT})" in \
        launch.output(0)
    (launched,) = list(runs.iterdir())  # one run directory, the chief's, on the shared disk
    summary = read_json(launched / "summary.json")
    assert summary["status"] == "completed"
    assert summary["strategy"] == "multi_worker"
    assert summary["replicas"] == 2 and summary["workers"] == 2
    _assert_same_run(launched, _one_process(overrides, tmp_path / "single"))


@pytest.mark.heavy  # about 3 minutes on 2 loaded cores: outside the CI budget
def test_a_cut_link_stops_both_hosts_naming_the_other_and_the_resume_is_exact(
        network, tmp_path, shapes_data_dir):
    runs = tmp_path / "runs"
    # Many short epochs: the run is still going when the link is cut in epoch 3; each
    # epoch's end is a checkpoint the resume starts from. Over 120 steps, 2 workers and one
    # process drift apart by float rounding (summing in another order): the reference is an
    # uninterrupted 2-worker launch on 127.0.0.1, which sums as the two hosts do.
    overrides = short_default_args(shapes_data_dir, runs, "training.epochs=24",
                               "training.steps_per_epoch=5", "runtime.peer_timeout=5")
    launch = _launch(network, ["train", DEFAULT_RECIPE, *overrides], tmp_path=tmp_path)
    launch.wait_for("[w0] Epoch 3/24", timeout=TIMEOUT_SECONDS)
    network.cut(1)
    cut_at = time.monotonic()
    codes = launch.finish(timeout=STOP_BOUND_SECONDS)
    print(f"both hosts stopped {time.monotonic() - cut_at:.1f} s after the cut")
    output = launch.output()
    assert codes == [1, 1], output[-4000:]
    chief, worker = launch.output(0), launch.output(1)
    # The chief (the coordination service's leader) names worker 1; worker 1, whose
    # heartbeats no longer reach the chief, names the chief.
    assert ("[w0] Error: training failed after" in chief and
            f"{network.address(1)}:{PORT} (worker 1, /job:worker/replica:0/task:1) stopped "
            "answering TensorFlow's coordination service (no heartbeat for 5 s)" in chief), \
        chief[-4000:]
    assert (f"{network.address(0)}:{PORT} (worker 0, /job:worker/replica:0/task:0) stopped "
            "answering" in worker), worker[-4000:]
    assert "-- train --resume RUN_DIR" in chief
    assert "Traceback" not in output
    (run,) = list(runs.iterdir())
    assert read_json(run / "summary.json")["status"] == "failed"

    network.restore(1)
    resumed = _launch(network, ["train", "--resume", run], tmp_path=tmp_path)
    assert resumed.finish(timeout=TIMEOUT_SECONDS) == [0, 0], resumed.output()[-4000:]
    assert "resuming from checkpoint" in resumed.output(0)
    assert read_json(run / "summary.json")["status"] == "completed"
    reference_runs = tmp_path / "reference"
    code, text = run_tfaccel(["launch", "--workers", "2", "--", "train", DEFAULT_RECIPE,
                              *overrides, "--set", f"runtime.runs_dir={reference_runs}"],
                             tmp_path=tmp_path)
    assert code == 0, text[-4000:]
    (reference,) = list(reference_runs.iterdir())
    for got, expected in zip(_weights(run), _weights(reference)):
        np.testing.assert_array_equal(got, expected)
    assert _losses(run) == _losses(reference) and len(_losses(run)) == 24

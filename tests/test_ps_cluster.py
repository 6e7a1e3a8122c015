"""runtime.strategy parameter_server without a cluster: the layout of chief/ps/workers, the
TF_CONFIG of each task, SLURM, the group that tolerates a lost server, the messages."""

import io
import json
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner
from launch_helpers import DEFAULT_RECIPE, set_slurm_task

from tfaccel.cli import launch, tf_configs, worker_group
from tfaccel.cli.main import main
from tfaccel.errors import UserInputError


def test_hosts_are_the_chief_then_the_ps_then_the_workers():
    hosts = ["a:1", "b:2", "c:3", "d:4"]
    cluster = tf_configs.parameter_server_cluster(hosts, ps=1)
    assert cluster == {"chief": ["a:1"], "ps": ["b:2"], "worker": ["c:3", "d:4"]}
    tasks = [json.loads(tf_configs.parameter_server_tf_config(cluster, i))["task"]
             for i in range(4)]
    assert tasks == [{"type": "chief", "index": 0}, {"type": "ps", "index": 0},
                     {"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    with pytest.raises(UserInputError, match=r"needs a chief, --ps N >= 1 servers and at "
                                             r"least one worker: 4 or more hosts; got --ps 2 "
                                             r"and 3 host\(s\)"):
        tf_configs.parameter_server_cluster(hosts[:3], ps=2)
    with pytest.raises(UserInputError, match="--index must be between 0 and 3 .* got 4"):
        tf_configs.parameter_server_task(cluster, 4)


def test_slurm_tasks_become_chief_ps_and_workers(monkeypatch):
    # Two nodes, two tasks each: task 0 the chief, task 1 the ps, tasks 2-3 the workers.
    set_slurm_task(monkeypatch, 2)
    hosts, index = tf_configs.slurm_cluster(port=2222)
    cluster = tf_configs.parameter_server_cluster(hosts, ps=1)
    assert cluster == {"chief": ["node1:2222"], "ps": ["node1:2223"],
                       "worker": ["node2:2222", "node2:2223"]}
    assert tf_configs.parameter_server_task(cluster, index) == ("worker", 0)


def test_a_local_cluster_starts_the_chief_and_servers_and_says_its_ports(monkeypatch):
    # The chief and the servers are stand-ins: the chief ends, the servers would serve on.
    monkeypatch.setattr(launch, "worker_command", lambda args: [
        sys.executable, "-c", "import os, json; print(json.loads(os.environ['TF_CONFIG'])"
                              "['task'])"])
    monkeypatch.setattr(launch, "server_command", lambda: [
        sys.executable, "-c", "import time; time.sleep(600)"])
    train = launch.TrainArgs(args=["train", "r.yaml"], run_dir=None, resume=False)
    out = io.StringIO()
    assert launch.run_parameter_server_local(train, ps=1, workers=2, out=out) == 0
    text = out.getvalue()
    assert "[chief] {'type': 'chief', 'index': 0}" in text
    assert "1 ps on 127.0.0.1:" in text and "2 worker(s) on 127.0.0.1:" in text
    (line,) = [l for l in text.splitlines() if "every network interface" in l]
    assert line.startswith("[launch] the cluster's TensorFlow gRPC servers open ports ")
    assert "exited" not in text  # the servers were stopped after the chief, not reported


def _group(scripts, *, servers):
    out = io.StringIO()
    commands = [[sys.executable, "-c", textwrap.dedent(s)] for s in scripts]
    group = worker_group.WorkerGroup(commands, [None] * len(scripts), labels=["chief", "ps0", "w0"],
                               out=out, grace_seconds=1.0, servers=servers)
    return group, out


def test_a_lost_server_is_said_and_the_chief_decides_the_exit_code():
    group, out = _group(["import time; time.sleep(3)", "import time; time.sleep(600)",
                         "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                        servers=2)
    assert group.run() == 0
    assert ("[launch] w0 exited with signal SIGKILL; the chief carries on without it"
            in out.getvalue())
    assert all(p.poll() is not None for p in group.processes)  # ps0 stopped at the end
    group, out = _group(["import sys; sys.exit(1)", "import time; time.sleep(600)",
                         "import time; time.sleep(600)"], servers=2)
    assert group.run() == 1
    assert "failed: chief exited first with code 1" in out.getvalue()


def test_restarts_go_with_a_local_parameter_server_cluster_and_reach_it(monkeypatch):
    result = CliRunner().invoke(main, ["launch", "--workers", "2", "--restarts", "1", "--",
                                       "train", str(DEFAULT_RECIPE)])
    assert result.exit_code == 2
    assert "--restarts goes with --ps and --workers" in result.output
    given = {}
    monkeypatch.setattr(launch, "run_parameter_server_local",
                        lambda train, **kwargs: given.update(kwargs) or 0)
    recipe = ["train", str(DEFAULT_RECIPE), "--set", "runtime.strategy=parameter_server",
              "--run-dir", "unused"]
    for extra, restarts in (([], worker_group.DEFAULT_RESTARTS), (["--restarts", "0"], 0)):
        result = CliRunner().invoke(main, ["launch", "--ps", "1", "--workers", "2", *extra,
                                           "--", *recipe])
        assert result.exit_code == 0, result.output
        assert given == {"ps": 1, "workers": 2, "restarts": restarts}


def test_ps_with_a_recipe_of_another_strategy_is_refused(monkeypatch):
    result = CliRunner().invoke(main, ["launch", "--ps", "1", "--workers", "2", "--",
                                       "train", str(DEFAULT_RECIPE)])
    assert result.exit_code == 2
    assert "recipe's runtime.strategy is 'auto'; set runtime.strategy: parameter_server" \
        in result.output


def test_the_strategy_needs_a_parameter_server_cluster(monkeypatch):
    from tfaccel.engine.strategy import make_strategy

    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(UserInputError, match="TF_CONFIG is not set.*--ps N --workers M"):
        make_strategy("parameter_server")
    monkeypatch.setenv("TF_CONFIG", tf_configs.tf_config(["127.0.0.1:1", "127.0.0.1:2"], 0))
    with pytest.raises(UserInputError, match=r"it has no chief, ps \(jobs: \['worker'\]\)"):
        make_strategy("parameter_server")


def test_a_lost_ps_is_named_and_a_lost_worker_is_not_an_error():
    import tensorflow as tf

    from tfaccel.engine.ps_cluster import lost_parameter_server

    error = tf.errors.UnavailableError(None, None, "2 root error(s): /job:worker/replica:0/"
                                       "task:1 ok; /job:ps/replica:0/task:0 unreachable")
    lost = lost_parameter_server(error, step=57, run_dir="runs/x")
    assert str(lost).startswith("parameter server /job:ps/replica:0/task:0 is unreachable "
                                "(TensorFlow: UnavailableError)")
    assert "stopped after 57 completed step(s)" in str(lost)
    assert "-- train --resume runs/x" in str(lost)
    named = lost_parameter_server(error, step=57, run_dir="runs/x",
                                  cluster={"ps": ["10.1.2.2:2222"], "worker": []})
    assert str(named).startswith("parameter server 10.1.2.2:2222 (/job:ps/replica:0/task:0) "
                                 "is unreachable (TensorFlow: UnavailableError): its link is "
                                 "down or it stopped")
    assert "--ps N --hosts ... --index I" in str(named)
    worker = tf.errors.UnavailableError(None, None, "/job:worker/replica:0/task:1 is gone")
    assert lost_parameter_server(worker, step=1, run_dir="r") is None
    assert lost_parameter_server(ValueError("/job:ps/replica:0/task:0"), step=1,
                                 run_dir="r") is None


def test_metrics_with_running_sums_are_refused_and_means_are_per_batch():
    import numpy as np

    from tfaccel.config.recipe import TrainingConfig
    from tfaccel.data.dataset_info import DatasetInfo
    from tfaccel.training.run.coordinator_loop import _loss_and_metrics

    class Data:
        validation = None
        info = DatasetInfo()

    _, pairs = _loss_and_metrics(TrainingConfig(metrics=["accuracy"]), Data())
    ((name, fn),) = pairs
    values = fn(np.array([0, 1]), np.array([[0.9, 0.1], [0.8, 0.2]], "float32"))
    assert name == "accuracy" and list(np.asarray(values)) == [1.0, 0.0]
    with pytest.raises(UserInputError, match="training.metrics 'auc' keeps running sums"):
        _loss_and_metrics(TrainingConfig(metrics=["auc"]), Data())
    # metrics auto of a regression: the per-batch mae (rmse keeps running sums, left out).
    Data.info = DatasetInfo(task="regression", num_outputs=1)
    loss, pairs = _loss_and_metrics(TrainingConfig(), Data())
    ((name, fn),) = pairs
    values = fn(np.array([[1.0], [3.0]], "float32"), np.array([[2.0], [6.0]], "float32"))
    assert name == "mae" and list(np.asarray(values)) == [1.0, 3.0]


def test_accumulation_is_refused_before_the_cluster_is_touched():
    import types

    from tfaccel.config.batching import plan_batches
    from tfaccel.config.recipe import load_recipe
    from tfaccel.training.run.coordinator_loop import train_on_cluster

    recipe = load_recipe(DEFAULT_RECIPE, ["runtime.strategy=parameter_server",
                                          "training.accumulation_steps=2"])
    plan = plan_batches(global_batch_size=64, replicas=1, accumulation_steps=2)
    ctx = types.SimpleNamespace(recipe=recipe, session=types.SimpleNamespace(
        plan=plan, strategy=None))
    with pytest.raises(UserInputError, match=r"training.accumulation_steps 2 cannot be used "
                                             r"with runtime.strategy parameter_server"):
        train_on_cluster(ctx)


def test_launch_ps_under_slurm_runs_this_tasks_role(monkeypatch):
    set_slurm_task(monkeypatch, 1)
    calls = []
    monkeypatch.setattr(launch, "run_parameter_server_node",
                        lambda train, **kw: calls.append((train, kw)) or 0)
    result = CliRunner().invoke(main, ["launch", "--ps", "1", "--port", "2222", "--", "train",
                                       str(DEFAULT_RECIPE), "--set",
                                       "runtime.strategy=parameter_server"])
    assert result.exit_code == 0, result.output
    ((train, kw),) = calls
    assert kw == {"hosts": ["node1:2222", "node1:2223", "node2:2222", "node2:2223"],
                  "index": 1, "ps": 1}
    assert train.args[:2] == ["train", str(DEFAULT_RECIPE)] and train.run_dir is None


def _serving_ps_task(tmp_path, chief):
    """A ps task of a 1-ps cluster whose chief is the socket `chief`, once it serves."""
    import subprocess

    from launch_helpers import child_env

    hosts = [f"127.0.0.1:{chief.getsockname()[1]}",
             *(f"127.0.0.1:{p}" for p in tf_configs.free_ports(2))]
    cluster = tf_configs.parameter_server_cluster(hosts, ps=1)
    env = {**child_env(tmp_path), "TF_CONFIG": tf_configs.parameter_server_tf_config(cluster, 1)}
    process = subprocess.Popen(launch.server_command(), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        if "serving on" in line:
            return process, hosts[0]
    process.kill()
    raise AssertionError("the ps task ended before serving")


def _ended_saying_the_chief_is_gone(process, chief_address):
    try:
        output = process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert f"ps 0: the chief ({chief_address}) is gone; stopping." in output


def test_a_task_ends_after_a_chief_that_came_and_went_between_two_slow_tries(tmp_path):
    # A short job's chief can be up for less than the 2 s between two tries of a task that
    # already saw it: until the first answer the task tries every 0.1 s (it served forever).
    import socket

    chief = socket.socket()
    chief.bind(("127.0.0.1", 0))  # bound, not listening: refused, as a chief not up yet
    process, address = _serving_ps_task(tmp_path, chief)
    time.sleep(1.0)  # the task tried and was refused
    chief.listen()
    time.sleep(0.5)  # up for half a second: between two of the old 2-second tries
    chief.close()
    _ended_saying_the_chief_is_gone(process, address)


@pytest.mark.slow  # one TensorFlow process (about 10-20 s on 2 loaded cores)
def test_a_task_ends_by_itself_once_its_chief_is_gone(tmp_path):
    # On its own machine (--hosts, SLURM) a ps or worker would otherwise serve forever.
    import socket

    chief = socket.socket()
    chief.bind(("127.0.0.1", 0))
    chief.listen()
    process, address = _serving_ps_task(tmp_path, chief)
    time.sleep(3)  # the task has seen its chief answer
    assert process.poll() is None
    chief.close()
    _ended_saying_the_chief_is_gone(process, address)


def test_a_lost_worker_is_said_once_by_host_and_port(monkeypatch):
    import logging

    from tfaccel.training.distributed import lost_ps_worker

    said = []
    monkeypatch.setattr(lost_ps_worker, "say", said.append)
    workers = ["10.1.2.3:2222", "10.1.2.4:2222"]
    # TensorFlow's coordinator logs this once per closure in flight on the lost worker.
    failed = ("Worker /job:worker/replica:0/task:1 failed with UnavailableError():recvmsg:"
              "Connection timed out")
    with lost_ps_worker.LostWorkers(workers):
        for _ in range(3):
            logging.getLogger("tensorflow").error("%s", failed)
        logging.getLogger("tensorflow").error("Worker %s failed with %r:%s",
                                              "/job:worker/replica:0/task:7", None, "out")
    logging.getLogger("tensorflow").error("%s", failed.replace("task:1", "task:0"))  # after
    assert said == ["worker 1 (10.1.2.4:2222, /job:worker/replica:0/task:1) is unreachable "
                    "(TensorFlow: UnavailableError): its link is down or it stopped; its "
                    "steps run on the other worker(s), each counted once, and training "
                    "carries on."]
    assert lost_ps_worker.lost_worker_line("Worker has been recovered.", workers) is None


def test_the_keepalive_bounds_a_silent_peer_and_keeps_the_users_own(monkeypatch):
    import os

    from tfaccel.engine import ps_cluster

    assert ps_cluster.keepalive_options(10) == ("grpc.keepalive_time_ms=5000,grpc.keepalive_timeout_ms="
                                        "5000,grpc.http2.max_pings_without_data=0")
    assert ps_cluster.keepalive_options(0.1).startswith("grpc.keepalive_time_ms=500,")  # gRPC's floor
    monkeypatch.delenv(ps_cluster.GRPC_OPTIONS_VARIABLE, raising=False)
    ps_cluster.bound_peer_silence(4)
    assert os.environ[ps_cluster.GRPC_OPTIONS_VARIABLE] == ps_cluster.keepalive_options(4)
    monkeypatch.setenv(ps_cluster.GRPC_OPTIONS_VARIABLE, "grpc.keepalive_time_ms=60000")
    ps_cluster.bound_peer_silence(4)
    assert os.environ[ps_cluster.GRPC_OPTIONS_VARIABLE] == "grpc.keepalive_time_ms=60000"


@pytest.mark.slow  # a chief, a ps and 2 workers on 127.0.0.1 (about 30-60 s on 2 loaded cores)
@pytest.mark.multiworker
def test_a_workers_iterator_starts_at_the_batches_its_steps_took(tmp_path, monkeypatch):
    # TensorFlow rebuilds a restarted worker's iterator with the same function: given
    # positions [3, 5] (what each worker's steps had taken), worker 0 reads its share
    # 0, 2, 4, ... from its 4th batch and worker 1 its share 1, 3, 5, ... from its 6th.
    from launch_helpers import ps_cluster_result

    found = ps_cluster_result(__file__, ps=1, workers=2,
                              tmp_path=tmp_path, monkeypatch=monkeypatch)
    seen = {0: [], 1: []}
    for value, worker in found["steps"]:
        seen[worker].append(value)
    # Each worker's batches in stream order (one worker runs one step at a time).
    assert seen[0] == [2 * (3 + k) for k in range(len(seen[0]))], found
    assert seen[1] == [2 * (5 + k) + 1 for k in range(len(seen[1]))], found
    assert found["positions"] == [3 + len(seen[0]), 5 + len(seen[1])]  # each batch counted
    assert len(found["steps"]) == 12


def _iterator_chief():
    """The chief of the test above (this file run as a script): 12 steps that return their
    batch and worker, then the positions; prints RESULT and a JSON."""
    import tensorflow as tf

    from tfaccel.engine import ps_cluster

    strategy = ps_cluster.make_parameter_server_strategy()
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        positions = tf.Variable(tf.constant([3, 5], tf.int64), trainable=False)
    iterators = ps_cluster.per_worker_iterators(
        coordinator, lambda: tf.data.Dataset.range(100), positions=positions)

    @tf.function
    def step(iterator):
        def replica(element):
            value, worker = element
            ps_cluster.take_position(positions, worker)
            return value, worker

        return strategy.run(replica, args=(next(iterator),))

    values = [coordinator.schedule(step, args=(iterators,)) for _ in range(12)]
    coordinator.join()
    steps = [[int(v) for v in value.fetch()] for value in values]
    print("RESULT " + json.dumps({"steps": steps,
                                  "positions": positions.numpy().tolist()}), flush=True)


if __name__ == "__main__":
    _iterator_chief()

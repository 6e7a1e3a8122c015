"""`tfaccel launch` without TensorFlow workers: TF_CONFIG, roles, SLURM, the process group."""

import io
import json
import re
import sys

import pytest
from click.testing import CliRunner
from launch_helpers import DEFAULT_RECIPE

from tfaccel.cli import launch
from tfaccel.cli.main import main, parse_train_command
from tfaccel.cli.tf_configs import tf_config
from tfaccel.config import cluster
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_worker_role_follows_tensorflow_with_a_chief_job(monkeypatch):
    jobs = {"chief": ["c:1"], "worker": ["w:1", "w:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": jobs,
                                                "task": {"type": "worker", "index": 0}}))
    assert cluster.worker_role("multi_worker") == cluster.WorkerRole(index=1, count=3)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": jobs,
                                                "task": {"type": "chief", "index": 0}}))
    assert cluster.worker_role("multi_worker").chief
    monkeypatch.delenv("TF_CONFIG")
    assert cluster.worker_role("multi_worker") == cluster.WorkerRole()


def test_prepare_creates_one_run_dir_and_passes_it_to_every_worker(tmp_path):
    runs = tmp_path / "runs"
    prepared = launch.prepare_train_args(parse_train_command(
        ["train", str(DEFAULT_RECIPE), "--set", f"runtime.runs_dir={runs}"]),
        choose_run_dir=True)
    (created,) = list(runs.iterdir())
    assert prepared.args[-2:] == ["--run-dir", str(created)]
    assert prepared.run_dir == str(created) and not prepared.resume
    assert list(created.iterdir()) == []  # the chief writes everything
    # --resume and --run-dir pass through untouched; a cluster node does not choose.
    resumed = launch.prepare_train_args(parse_train_command(
        ["train", "--resume", str(created)]), choose_run_dir=True)
    assert resumed.args == ["train", "--resume", str(created)] and resumed.resume
    node = launch.prepare_train_args(parse_train_command(["train", str(DEFAULT_RECIPE)]),
                                     choose_run_dir=False)
    assert node.args == ["train", str(DEFAULT_RECIPE)] and node.run_dir is None


@pytest.mark.parametrize("args, message", [
    ([], "launch runs `train` on every worker"),
    (["validate", "x.yaml"], "launch runs `train` on every worker"),
    (["train"], "needs `-- train RECIPE`"),
    (["train", "r.yaml", "--bogus"], "the train arguments after `--` are wrong"),
    (["train", "--resume", "d", "--run-dir", "e"], "cannot be combined"),
])
def test_prepare_refuses_what_is_not_a_train_command(args, message):
    with pytest.raises(UserInputError, match=message):
        launch.prepare_train_args(parse_train_command(args), choose_run_dir=True)


def test_a_recipe_mistake_is_reported_once_by_the_launcher(tmp_path):
    result = CliRunner().invoke(main, ["launch", "--workers", "2", "--", "train",
                                       str(DEFAULT_RECIPE), "--set", "training.epoch=3"])
    assert result.exit_code == 2
    assert "training.epoch" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args, message", [
    (["--workers", "2", "--hosts", "a:1", "--index", "0"], "not both"),
    (["--hosts", "a:1,b:2"], "go together"),
    ([], "give --workers N, or --hosts and --index"),
])
def test_launch_usage_errors(args, message, monkeypatch):
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    result = CliRunner().invoke(main, ["launch", *args, "--", "train", "r.yaml"])
    assert result.exit_code == 2 and message in result.output


def test_a_local_launch_prepares_the_builtin_dataset_once_before_the_workers(tmp_path,
                                                                             monkeypatch):
    # Otherwise every worker would generate it into the same TFDS folder at the same time.
    import subprocess

    from tfaccel.config.recipe import load_recipe

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(args) or
                        subprocess.CompletedProcess(args, 0))
    data = load_recipe(DEFAULT_RECIPE, [f"data.data_dir={tmp_path}"]).data
    launch._prepare_builtin_once(data)
    assert len(calls) == 1 and calls[0][-1] == str(tmp_path)
    (tmp_path / "tfaccel_shapes" / "1.0.0").mkdir(parents=True)
    (tmp_path / "tfaccel_shapes" / "1.0.0" / "dataset_info.json").write_text("{}")
    launch._prepare_builtin_once(data)
    assert len(calls) == 1  # prepared: nothing to do


def test_time_based_checkpoints_are_refused_on_several_workers(monkeypatch, tmp_path):
    # Each worker's clock would choose another step; saving is collective. Refused before
    # anything starts (no TensorFlow cluster, no directory).
    import tfaccel

    monkeypatch.setenv("TF_CONFIG", tf_config(["127.0.0.1:1", "127.0.0.1:2"], 1))
    with pytest.raises(UserInputError, match=r"training.checkpoint_every_minutes \(5.0\) "
                                             r"cannot be used by a multi-worker run \(2 "):
        tfaccel.train(str(DEFAULT_RECIPE), [f"runtime.runs_dir={tmp_path}",
                                            "training.checkpoint_every_minutes=5"])
    assert list(tmp_path.iterdir()) == []


def test_file_sources_shard_by_file_only_when_every_worker_gets_one(monkeypatch):
    from tfaccel.data import sharding
    from tfaccel.data.tail import TailOptions

    monkeypatch.setattr(sharding, "workers_in_scope", lambda: 4)
    monkeypatch.setattr(sharding, "multi_worker_in_scope", lambda: True)
    none = TailOptions()
    assert sharding.choose_file_policy(none, num_files=8) == TailOptions(shard_policy="auto")
    assert sharding.choose_file_policy(none, num_files=3) == TailOptions(shard_policy="data",
                                                                         deterministic=True)
    assert sharding.choose_file_policy(TailOptions(shard_policy="off"), num_files=1) == \
        TailOptions(shard_policy="off")  # the caller's choice is kept
    # A resumable stream holds no reader TF could split: by element, said so.
    assert sharding.choose_file_policy(TailOptions(stream=1),
                                       num_files=8).shard_policy == "data"
    # The source kept its own files already (an input context): not split again.
    assert sharding.choose_file_policy(none, num_files=8, sharded=True) == TailOptions(
        shard_policy="off")
    monkeypatch.setattr(sharding, "workers_in_scope", lambda: 1)
    assert sharding.choose_file_policy(none, num_files=1) == TailOptions(shard_policy="auto")


def _open_port_lines(text):
    return [line for line in text.splitlines() if "every network interface" in line]


def test_a_cluster_node_says_its_port_is_open_to_every_interface(monkeypatch):
    # `--hosts`/`--index` and SLURM both end in run_node. The worker itself is a no-op here:
    # the line is the launcher's, said before the worker starts.
    monkeypatch.setattr(launch, "worker_command", lambda args: [sys.executable, "-c", "pass"])
    train = launch.TrainArgs(args=["train", "r.yaml"], run_dir=None, resume=False)
    out = io.StringIO()
    assert launch.run_node(train, hosts=["node1:2222", "node2:2223"], index=1, out=out) == 0
    assert _open_port_lines(out.getvalue()) == [(
        "[launch] worker 1's TensorFlow gRPC server opens port 2223 on every network "
        "interface (TensorFlow binds 0.0.0.0 and takes no other address), without "
        "authentication; it runs any graph or op a peer sends, file reads and writes "
        "included: keep it inside a trusted network or behind a firewall.")]


def test_a_local_launch_says_its_loopback_ports_are_open_to_every_interface(monkeypatch):
    # TF_CONFIG names 127.0.0.1, yet TensorFlow's servers listen on *:PORT (seen with ss).
    monkeypatch.setattr(launch, "worker_command", lambda args: [sys.executable, "-c", "pass"])
    train = launch.TrainArgs(args=["train", "r.yaml"], run_dir=None, resume=False)
    out = io.StringIO()
    assert launch.run_local(train, workers=2, out=out) == 0
    ports = re.search(r"2 worker\(s\) on 127\.0\.0\.1:(\d+), 127\.0\.0\.1:(\d+);",
                      out.getvalue()).groups()
    (line,) = _open_port_lines(out.getvalue())
    assert line.startswith(f"[launch] the workers' TensorFlow gRPC servers open ports "
                           f"{ports[0]}, {ports[1]} on every network interface")
    assert "without authentication" in line
    assert line.endswith("keep them inside a trusted network or behind a firewall.")
    # One worker trains alone (no cluster, no server): nothing to say.
    out = io.StringIO()
    assert launch.run_local(train, workers=1, out=out) == 0
    assert _open_port_lines(out.getvalue()) == []


@pytest.mark.parametrize("kept", [True, False])
def test_a_launch_stopped_by_sigterm_suggests_a_resume_only_when_the_run_directory_is_there(
        monkeypatch, tmp_path, kept):
    # 143 after a checkpoint: resume. 143 while the workers waited for each other: the
    # unstarted run directory was removed, nothing to resume.
    monkeypatch.setattr(launch, "worker_command",
                        lambda args: [sys.executable, "-c", "raise SystemExit(143)"])
    run_dir = tmp_path / "run"
    if kept:
        run_dir.mkdir()
    train = launch.TrainArgs(args=["train", "r.yaml"], run_dir=str(run_dir), resume=False)
    out = io.StringIO()
    assert launch.run_local(train, workers=1, out=out) == 143
    resume = f"resume with: tfaccel launch --workers 1 -- train --resume {run_dir}"
    assert (resume in out.getvalue()) == kept

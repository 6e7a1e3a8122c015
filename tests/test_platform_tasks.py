"""`tfaccel train` with no launcher, each process started with its own TF_CONFIG on 127.0.0.1
as Kubeflow's TFJob or Vertex AI start them (tfaccel/training/run/platform_tasks.py): chief +
worker with an evaluator task, workers only, a parameter-server cluster; every closing
line names the directory the chief wrote. The TF_CONFIG reading of every shape is tested
without TensorFlow in tests/test_cluster_platforms.py."""

import json
import subprocess
import sys

import pytest
from launch_helpers import child_env, outputs_of, write_blobs

from tfaccel.cli.tf_configs import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.multiworker]

STEPS_PER_EPOCH = 10  # 1000 examples, global batch 100


def _recipe(tmp_path, *, strategy="auto", epochs=2):
    """A tiny MLP on 1000 separable examples (200 held out), float32, 2 epochs."""
    write_blobs(tmp_path)
    path = tmp_path / "tiny.yaml"
    path.write_text(f"""
name: tiny
data: {{source: arrays, path: blobs.npz, validation_split_name: test}}
model: {{name: mlp, params: {{hidden_units: [16], normalization: none, dropout: 0.0}}}}
optimizer: {{name: adam, learning_rate: 1e-2}}
training: {{epochs: {epochs}, global_batch_size: 100, steps_per_execution: 1}}
runtime: {{strategy: {strategy}, precision: float32, tensorboard: false, verbose: 2,
          runs_dir: {tmp_path / 'runs'}}}
""")
    return path


def _start_tasks(tasks, *, tmp_path):
    """Starts ``tfaccel ARGS`` once per ``(tf_config, args)``; their (codes, outputs)."""
    processes = []
    for config, args in tasks:
        env = child_env(tmp_path)
        env["TF_CONFIG"] = json.dumps(config)
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "tfaccel.cli", *map(str, args)], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
            start_new_session=True))
    return outputs_of(processes)


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_chief_worker_and_evaluator_as_tfjob_starts_them(tmp_path):
    recipe = _recipe(tmp_path)
    chief, worker, evaluator = (f"127.0.0.1:{p}" for p in free_ports(3))
    # TFJob lists the evaluator in the cluster (some versions); Vertex AI adds its fields.
    spec = {"chief": [chief], "worker": [worker], "evaluator": [evaluator]}
    vertex = {"environment": "cloud", "job": {"worker_pool_specs": []}}
    run_dir = tmp_path / "shared" / "exp1"
    codes, (chief_out, worker_out, eval_out) = _start_tasks([
        ({"cluster": spec, "task": {"type": "chief", "index": 0}},
         ["train", recipe, "--run-dir", run_dir]),
        # The worker names another --run-dir: its closing line must name the chief's.
        ({"cluster": spec, "task": {"type": "worker", "index": 0, "trial": ""}, **vertex},
         ["train", recipe, "--run-dir", tmp_path / "elsewhere"]),
        ({"cluster": spec, "task": {"type": "evaluator", "index": 0}},
         ["train", recipe, "--run-dir", run_dir]),
    ], tmp_path=tmp_path)
    assert codes == [0, 0, 0], f"{chief_out}\n---\n{worker_out}\n---\n{eval_out}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["strategy"] == "multi_worker" and summary["workers"] == 2
    assert f"Run directory: {run_dir}" in chief_out
    assert f"The chief (worker 0) wrote the run directory: {run_dir}" in worker_out
    assert not (tmp_path / "elsewhere").exists()
    # The evaluator evaluated the chief's checkpoints, the last one the final epoch's, and
    # found the chief's own validation figures for it (the whole split, on one device).
    evaluated = _records(run_dir / "evaluation" / "metrics.jsonl")
    assert 1 <= len(evaluated) <= 2
    last = evaluated[-1]
    assert (last["checkpoint"], last["global_step"]) == ("epoch-002", 2 * STEPS_PER_EPOCH)
    chief_epochs = _records(run_dir / "metrics.jsonl")
    assert len(chief_epochs) == 2
    assert abs(last["val_loss"] - chief_epochs[-1]["val_loss"]) < 1e-4
    assert abs(last["val_accuracy"] - chief_epochs[-1]["val_accuracy"]) < 1e-6
    assert f"The chief wrote the run directory: {run_dir}" in eval_out
    assert "Evaluator done:" in eval_out


def test_workers_only_name_the_directory_the_chief_generated(tmp_path):
    recipe = _recipe(tmp_path, epochs=1)
    hosts = [f"127.0.0.1:{p}" for p in free_ports(2)]
    codes, outputs = _start_tasks([
        ({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": i}},
         ["train", recipe]) for i in range(2)], tmp_path=tmp_path)
    assert codes == [0, 0], "\n---\n".join(outputs)
    (run_dir,) = list((tmp_path / "runs").iterdir())  # worker 0's, generated
    assert f"Run directory: {run_dir}" in outputs[0]
    assert f"The chief (worker 0) wrote the run directory: {run_dir.resolve()}" in outputs[1]


def test_a_parameter_server_cluster_started_task_by_task(tmp_path):
    recipe = _recipe(tmp_path, strategy="parameter_server", epochs=1)
    chief, ps, worker = (f"127.0.0.1:{p}" for p in free_ports(3))
    spec = {"chief": [chief], "ps": [ps], "worker": [worker]}
    run_dir = tmp_path / "shared" / "ps1"
    # The ps names another --run-dir and the worker none: their closing lines name the
    # chief's, told by the chief.
    own = {"chief": ["--run-dir", run_dir], "ps": ["--run-dir", tmp_path / "elsewhere"],
           "worker": []}
    codes, (chief_out, ps_out, worker_out) = _start_tasks([
        ({"cluster": spec, "task": {"type": job, "index": 0}},
         ["train", recipe, *own[job]]) for job in ("chief", "ps", "worker")],
        tmp_path=tmp_path)
    assert codes == [0, 0, 0], f"{chief_out}\n---\n{ps_out}\n---\n{worker_out}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["strategy"] == "parameter_server"
    assert summary["steps_completed"] == STEPS_PER_EPOCH
    for out, name in ((ps_out, "ps 0"), (worker_out, "worker 0")):
        assert f"{name} of a parameter-server cluster: serving the chief at {chief}" in out
        assert f"{name}: the chief ({chief}) is gone; stopping. The chief wrote the run " \
            f"directory: {run_dir.resolve()}" in out, out
        assert "tfaccel-chief-run-dir" not in out  # the chief's message taken out

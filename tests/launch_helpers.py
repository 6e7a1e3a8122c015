"""Running `tfaccel launch` (and other multi-process jobs) from tests, always with a timeout."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import warm_python

from tfaccel.cli.tf_configs import free_ports, tf_config
from tfaccel.cli.worker_group import WorkerGroup

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RECIPE = ROOT / "recipes" / "default.yaml"
PS_STEPS_PER_EPOCH = 40  # parameter_server_recipe's: 1000 examples, batch 25
# Generous: 2 TensorFlow processes on 2 shared cores; a hang fails instead of blocking CI.
TIMEOUT_SECONDS = 420


def set_slurm_task(monkeypatch, procid: int) -> None:
    """srun's variables for task `procid` of 2 nodes with 2 tasks each (CPU nodes)."""
    monkeypatch.setenv("SLURM_PROCID", str(procid))
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "node[1-2]")
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def child_env(tmp_path: Path) -> dict:
    """The environment of launched processes (this checkout first on PYTHONPATH, as
    tests/conftest.py sets it for the session), no GPU, a private TMPDIR."""
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["CUDA_VISIBLE_DEVICES"] = ""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir(exist_ok=True)
    env["TMPDIR"] = str(scratch)  # where non-chief workers put their scratch folders
    return env


def run_tfaccel(args, *, tmp_path: Path, timeout: float = TIMEOUT_SECONDS):
    """Runs ``python -m tfaccel.cli.main ARGS``; (return code, merged output)."""
    process = subprocess.Popen([sys.executable, "-m", "tfaccel.cli", *map(str, args)],
                               env=child_env(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        output, _ = process.communicate()
        raise AssertionError(f"timed out after {timeout} s:\n{output[-4000:]}")
    return process.returncode, output


# What a local launch says once about the other workers' output (tfaccel/cli/launch.py).
_LOGS_LINE = re.compile(r"^\[launch\] only the chief's output is shown; the other workers' goes "
                        r"to (.+)\.$", re.M)


def worker_logs(output: str) -> dict:
    """The log files a local launch named in `output`: {label: text} ({} if none named)."""
    match = _LOGS_LINE.search(output)
    if match is None:
        return {}
    return {Path(path).stem: Path(path).read_text() for path in match.group(1).split(", ")}


def with_worker_logs(output: str) -> str:
    """`output`, then each logged worker's lines prefixed ``[label] `` as the chief's are."""
    return output + "".join(f"[{label}] {line}\n" for label, text in worker_logs(output).items()
                            for line in text.splitlines())


def kill_tree(pid: int) -> None:
    """SIGKILLs a process and its children (the launcher and its workers)."""
    import signal

    for child in children(pid):
        kill_tree(child)
    for process in {warm_python.run_pid(pid), pid}:  # a warm client's run, then the client
        try:
            os.kill(process, signal.SIGKILL)
        except ProcessLookupError:
            pass


def children(pid: int) -> list:
    """Direct children of `pid` (Linux /proc); of a warm client (tests/warm_python.py), its
    run's children, as if the run were the client."""
    pid = warm_python.run_pid(pid)
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def run_script_on_workers(script: Path, args, *, workers: int, tmp_path: Path,
                          timeout: float = TIMEOUT_SECONDS):
    """Runs a Python script as `workers` MultiWorkerMirroredStrategy workers (TF_CONFIG)."""
    import io
    import threading

    hosts = [f"127.0.0.1:{port}" for port in free_ports(workers)]
    envs = []
    for index in range(workers):
        env = child_env(tmp_path)
        env["TF_CONFIG"] = tf_config(hosts, index)
        envs.append(env)
    out = io.StringIO()
    group = WorkerGroup([[sys.executable, str(script), *map(str, args)]] * workers, envs,
                        labels=[f"w{i}" for i in range(workers)], out=out)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", group.run()),
                              daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        group._send(9)  # SIGKILL: a hung collective must fail the test, not block it
        thread.join(30)
        raise AssertionError(f"timed out after {timeout} s:\n{out.getvalue()[-4000:]}")
    return result["code"], out.getvalue()


def short_default_args(data_dir, runs_dir, *extra) -> list:
    """``--set`` arguments: the default recipe shortened to a few float32 deterministic
    steps, no validation, global batch 32 (the launch tests' run)."""
    overrides = [f"data.data_dir={data_dir}", f"runtime.runs_dir={runs_dir}",
                 "runtime.precision=float32", "runtime.deterministic=true",
                 "runtime.verbose=2", "runtime.tensorboard=false",
                 "data.validation_split_name=null", "data.shuffle_buffer=512",
                 "training.global_batch_size=32", *extra]
    return [a for o in overrides for a in ("--set", o)]


def read_json(path: Path) -> dict:
    """A JSON file as a dict."""
    return json.loads(Path(path).read_text())


def write_blobs(tmp_path: Path) -> Path:
    """`tmp_path/blobs.npz`: 1000 training and 200 test examples of 16 features in 3
    linearly separable classes, Keras' x_train/y_train/x_test/y_test layout (seed 0)."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1200, 16)).astype("float32")
    y = (x @ rng.normal(size=(16, 3))).argmax(1).astype("int64")
    path = tmp_path / "blobs.npz"
    np.savez(path, x_train=x[:1000], y_train=y[:1000], x_test=x[1000:], y_test=y[1000:])
    return path


def outputs_of(processes) -> tuple:
    """Each process's (return code, output) once all end; any still running after
    `TIMEOUT_SECONDS` is killed with its children, so a hung collective fails the test."""
    try:
        outputs = [p.communicate(timeout=TIMEOUT_SECONDS)[0] for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                kill_tree(process.pid)
    return [p.returncode for p in processes], outputs


def parameter_server_recipe(tmp_path: Path, *, epochs: int) -> Path:
    """A tiny runtime.strategy parameter_server recipe (an MLP on 1000 separable examples,
    `PS_STEPS_PER_EPOCH` steps an epoch, a checkpoint every 20 steps) in `tmp_path`."""
    write_blobs(tmp_path)
    path = tmp_path / "ps.yaml"
    path.write_text(f"""
name: ps-tiny
data: {{source: arrays, path: blobs.npz, validation_split_name: test}}
model: {{name: mlp, params: {{hidden_units: [32], normalization: none, dropout: 0.0}}}}
optimizer: {{name: adam, learning_rate: 1e-2}}
training: {{epochs: {epochs}, global_batch_size: 25, checkpoint_every_steps: 20}}
runtime: {{strategy: parameter_server, precision: float32, tensorboard: false,
          runs_dir: {tmp_path / 'runs'}}}
""")
    return path


def launch_on_hosts(net, train_args, *, port: int, tmp_path: Path, options=()):
    """`tfaccel launch OPTIONS --hosts H0:PORT,H1:PORT,... --index I -- TRAIN_ARGS` in every
    host I of `net` (a tests/netns.py PrivateNetwork); the `HostProcesses`."""
    from netns import HostProcesses

    hosts = ",".join(f"{net.address(i)}:{port}" for i in range(net.hosts))
    return HostProcesses(net, [
        [sys.executable, "-m", "tfaccel.cli", "launch", *options, "--hosts", hosts,
         "--index", str(i), "--", *map(str, train_args)] for i in range(net.hosts)],
        env=child_env(tmp_path), cwd=tmp_path)


def ps_cluster_result(script: str, *, ps: int, workers: int, tmp_path: Path,
                      monkeypatch) -> dict:
    """Runs `script` as the chief of a local parameter-server cluster (`launch`'s own
    `run_parameter_server_local`: `ps` servers and `workers` workers on 127.0.0.1), waits
    for it (a hang fails with the launcher's output) and returns the JSON the chief printed
    after ``RESULT `` on one line."""
    import threading
    from io import StringIO

    from tfaccel.cli import launch

    for key, value in child_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(launch, "worker_command", lambda args: [sys.executable, script])
    train = launch.TrainArgs(args=["train"], run_dir=None, resume=False)
    out, result = StringIO(), {}
    thread = threading.Thread(daemon=True, target=lambda: result.setdefault(
        "code", launch.run_parameter_server_local(train, ps=ps, workers=workers, out=out)))
    thread.start()
    thread.join(TIMEOUT_SECONDS)
    assert not thread.is_alive(), out.getvalue()[-4000:]
    assert result["code"] == 0, out.getvalue()[-4000:]
    (line,) = [line for line in out.getvalue().splitlines() if "RESULT " in line]
    return json.loads(line.split("RESULT ", 1)[1])

"""`tfaccel launch`: a launch's workers (or chief, ps and workers) from its ``train ...`` command.

The TF_CONFIG of each process is written by tfaccel.cli.tf_configs; the processes are
started, watched and stopped by tfaccel.cli.worker_group.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, List, Optional, Sequence

from tfaccel import datasets
from tfaccel.cli.open_ports import open_ports_note
from tfaccel.cli.tf_configs import (
    free_ports,
    host_port,
    parameter_server_cluster,
    parameter_server_task,
    parameter_server_tf_config,
    tf_config,
)
from tfaccel.cli.worker_group import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_RESTARTS,
    RestartPolicy,
    WorkerGroup,
    worker_logs,
)
from tfaccel.config.recipe import load_recipe
from tfaccel.errors import TrainingError, UserInputError
from tfaccel.training.run_dir.run_files import check_resume_target, create_run_dir


@dataclasses.dataclass(frozen=True)
class TrainCommand:
    """The ``train ...`` part of a launch, parsed by the `train` command's own options.

    The CLI parses it (`tfaccel.cli.main.parse_train_command`) and hands it here typed, so
    the launcher never imports the command line that imports it.
    """

    args: List[str]  # the command line as given after ``--``, starting with ``train``
    recipe: Optional[str] = None
    overrides: tuple = ()
    run_dir: Optional[str] = None
    resume_dir: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class TrainArgs:
    """The ``train ...`` command line a launch passes to every worker, and its run dir."""

    args: List[str]
    run_dir: Optional[str]
    resume: bool


def prepare_train_args(command: TrainCommand, *, choose_run_dir: bool) -> TrainArgs:
    """Checks the ``train ...`` part of a launch and, if asked, picks the run directory.

    Every worker must agree on the one run directory the chief writes; a name made from
    the start time could differ between processes, so the launcher creates it once and
    passes ``--run-dir`` to all of them.

    Args:
        command: Everything after ``--``, parsed: ``train RECIPE [--set ...]`` or
            ``train --resume DIR``.
        choose_run_dir: Create the run directory here (a local launch) unless the
            arguments already name one (``--run-dir`` or ``--resume``).

    Raises:
        UserInputError: Neither a recipe nor a run to resume, or the recipe is wrong (it
            is loaded and checked, TF-free).
    """
    args = list(command.args)
    if command.recipe is None and command.resume_dir is None:
        raise UserInputError("launch needs `-- train RECIPE` or `-- train --resume RUN_DIR`.")
    check_resume_target(run_dir=command.run_dir, resume=command.resume_dir)
    if command.resume_dir is not None:
        return TrainArgs(args=args, run_dir=command.resume_dir, resume=True)
    recipe = load_recipe(command.recipe, command.overrides)  # a mistake shows here once
    if command.run_dir is not None or not choose_run_dir:
        return TrainArgs(args=args, run_dir=command.run_dir, resume=False)
    _prepare_builtin_once(recipe.data)
    directory = create_run_dir(name=recipe.name, runs_dir=recipe.runtime.runs_dir)
    return TrainArgs(args=args + ["--run-dir", str(directory)], run_dir=str(directory),
                     resume=False)


def _prepare_builtin_once(data) -> None:
    """Prepares the built-in dataset before the workers start, when it is not prepared.

    Otherwise every local worker would generate it into the same TFDS folder at once. Runs
    in a child process, so the launcher itself never holds TensorFlow in memory.
    """
    name = data.name or datasets.NAME
    if data.source not in ("builtin", "tfds") or name not in datasets.BUILTIN:
        return
    if datasets.is_prepared(data.data_dir, name=name):
        return
    root = data.data_dir or "the default TFDS data directory"
    # The CLI's own rule for TensorFlow's output in this process too (as in the workers).
    code = ("from tfaccel.quiet_import import quiet_tensorflow; quiet_tensorflow(); "
            "from tfaccel import datasets; import sys; datasets.prepare_builtin(sys.argv[1], "
            "data_dir=sys.argv[2] if len(sys.argv) > 2 else None)")
    result = subprocess.run([sys.executable, "-c", code, name,
                             *([data.data_dir] if data.data_dir else [])])
    if result.returncode != 0:
        raise TrainingError(f"preparing the built-in dataset in {root} failed (exit code "
                            f"{result.returncode}); see the messages above.")


def worker_command(train_args: Sequence[str]) -> List[str]:
    """The command line of one worker: this Python running tfaccel's CLI."""
    return [sys.executable, "-m", "tfaccel.cli", *train_args]


def run_local(train: TrainArgs, *, workers: int, out: IO[str] = sys.stdout,
              grace_seconds: float = DEFAULT_GRACE_SECONDS) -> int:
    """Runs `workers` processes of ``tfaccel train`` on 127.0.0.1 as one multi-worker job."""
    if workers < 1:
        raise UserInputError(f"--workers must be at least 1; got {workers}.")
    hosts = [f"127.0.0.1:{port}" for port in free_ports(workers)]
    envs = []
    for index in range(workers):
        env = dict(os.environ)
        env["TF_CONFIG"] = tf_config(hosts, index)
        envs.append(env)  # each worker's CLI quiets TensorFlow (or not) by the same rule
    labels = [f"w{i}" for i in range(workers)]
    logs = worker_logs(labels[1:])
    group = WorkerGroup([worker_command(train.args)] * workers, envs, labels=labels, out=out,
                        grace_seconds=grace_seconds, logs=logs)
    where = f"run directory {train.run_dir}" if train.run_dir else "the run directory"
    group.say(f"{workers} worker(s) on {', '.join(hosts)}; worker 0 (chief) writes {where}.")
    if logs:
        # The other workers train the same steps and print the same epochs: their lines
        # would only repeat the chief's. Named once, here.
        group.say("only the chief's output is shown; the other workers' goes to "
                  f"{', '.join(str(path) for path in logs.values())}.")
    if workers > 1:  # one worker trains alone under "auto" and opens no server
        # TF_CONFIG names 127.0.0.1, but TensorFlow's servers listen on every interface.
        group.say(open_ports_note(server="the workers' TensorFlow gRPC servers",
                                  ports=[host_port(host) for host in hosts],
                                  runs="they run any graph or op a peer sends"))
    code = group.run()
    # A signal before training removed the unstarted run directory: nothing to resume.
    if code in (128 + signal.SIGTERM, 128 + signal.SIGINT) and train.run_dir \
            and Path(train.run_dir).is_dir():
        group.say(f"resume with: tfaccel launch --workers {workers} -- train --resume "
                  f"{train.run_dir}")
    return code


def run_node(train: TrainArgs, *, hosts: Sequence[str], index: int,
             out: IO[str] = sys.stdout) -> int:
    """Runs this node's one worker of a cluster (``--hosts``/``--index`` or SLURM)."""
    env = dict(os.environ)
    env["TF_CONFIG"] = tf_config(hosts, index)
    group = WorkerGroup([worker_command(train.args)], [env], labels=[f"w{index}"], out=out)
    role = "the chief: it writes the run directory" if index == 0 else \
        "not the chief: its files go to a temporary folder"
    group.say(f"worker {index} of {len(hosts)} ({', '.join(hosts)}); {role}.")
    if len(hosts) > 1:  # a cluster of one trains alone under "auto" and opens no server
        group.say(open_ports_note(server=f"worker {index}'s TensorFlow gRPC server",
                                  ports=[host_port(hosts[index])],
                                  runs="it runs any graph or op a peer sends"))
    return group.run()


def server_command() -> List[str]:
    """The command line of a ps or worker task: TensorFlow's server, serving until stopped."""
    code = ("from tfaccel.quiet_import import quiet_tensorflow; quiet_tensorflow(); "
            "from tfaccel.engine.ps_cluster import serve_task; serve_task()")
    return [sys.executable, "-c", code]


def _task_label(job: str, index: int) -> str:
    return {"chief": "chief", "ps": f"ps{index}", "worker": f"w{index}"}[job]


def run_parameter_server_local(train: TrainArgs, *, ps: int, workers: int,
                               host: str = "127.0.0.1", out: IO[str] = sys.stdout,
                               restarts: int = DEFAULT_RESTARTS) -> int:
    """A whole parameter-server cluster on this machine: chief, `ps` servers, `workers`.

    Args:
        train: The chief's ``train ...`` arguments (the recipe's strategy must be
            parameter_server).
        ps: Parameter servers.
        workers: Workers.
        host: The address every task is reached at (127.0.0.1; another for a test host).
        out: Where the prefixed output goes.
        restarts: How many times each worker task that dies is started again at its
            address (TensorFlow's coordinator then runs steps on it again); 0: never.

    Returns:
        The chief's exit code (a worker lost is tolerated; a ps lost ends the chief).
    """
    if workers < 1 or ps < 1:
        raise UserInputError(f"--ps and --workers must be at least 1; got --ps {ps} "
                             f"--workers {workers}.")
    if restarts < 0:
        raise UserInputError(f"--restarts must be 0 or more; got {restarts}.")
    hosts = [f"{host}:{port}" for port in free_ports(ps + workers + 1, host=host)]
    cluster = parameter_server_cluster(hosts, ps=ps)
    group = _parameter_server_group(train, cluster=cluster, indices=range(len(hosts)), out=out,
                                    restarts=restarts)
    where = f"run directory {train.run_dir}" if train.run_dir else "the run directory"
    again = f"a worker that dies is started again at its address (up to {restarts} time(s) " \
        "each)" if restarts else "a worker that dies is not started again (--restarts 0)"
    group.say(f"chief on {hosts[0]}, {ps} ps on {', '.join(cluster['ps'])}, {workers} "
              f"worker(s) on {', '.join(cluster['worker'])}; the chief writes {where}; "
              f"{again}.")
    group.say(open_ports_note(server="the cluster's TensorFlow gRPC servers",
                              ports=[host_port(h) for h in hosts],
                              runs="they run any graph or op a peer sends"))
    code = group.run()
    if code != 0 and train.run_dir:
        group.say(f"resume with: tfaccel launch --ps {ps} --workers {workers} -- train "
                  f"--resume {train.run_dir}")
    return code


def run_parameter_server_node(train: TrainArgs, *, hosts: Sequence[str], index: int, ps: int,
                              out: IO[str] = sys.stdout) -> int:
    """This node's one task of a parameter-server cluster (``--hosts``/``--index``, SLURM)."""
    cluster = parameter_server_cluster(hosts, ps=ps)
    job, job_index = parameter_server_task(cluster, index)
    group = _parameter_server_group(train, cluster=cluster, indices=[index], out=out)
    role = "the chief: it runs the training loop and writes the run directory" \
        if job == "chief" else "serving the chief until it stops this task"
    group.say(f"{job} {job_index} of a cluster of {len(hosts)} ({', '.join(hosts)}); {role}.")
    group.say(open_ports_note(server=f"{job} {job_index}'s TensorFlow gRPC server",
                              ports=[host_port(hosts[index])],
                              runs="it runs any graph or op a peer sends"))
    return group.run()


def _parameter_server_group(train: TrainArgs, *, cluster: dict, indices,
                            out: IO[str], restarts: int = 0) -> WorkerGroup:
    """The processes of `indices` (chief first, when it is one of them); the worker tasks
    restarted up to `restarts` times each when the chief is among them."""
    commands, envs, labels, addresses = [], [], [], {}
    for index in indices:
        job, job_index = parameter_server_task(cluster, index)
        env = dict(os.environ)
        env["TF_CONFIG"] = parameter_server_tf_config(cluster, index)
        commands.append(worker_command(train.args) if job == "chief" else server_command())
        envs.append(env)
        labels.append(_task_label(job, job_index))
        addresses[labels[-1]] = cluster[job][job_index]
    servers = sum(label != "chief" for label in labels)
    # Only workers come back: a ps held variables that died with it (the chief stops).
    policy = RestartPolicy([label for label in labels if label.startswith("w")],
                           limit=restarts)
    # A node that runs only a server (--hosts) waits for it: it decides its own exit.
    return WorkerGroup(commands, envs, labels=labels, out=out,
                       servers=servers if "chief" in labels else 0, restarts=policy,
                       addresses=addresses)

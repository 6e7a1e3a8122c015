"""`tfaccel launch`: the TF_CONFIG of each worker, and starting and watching the processes."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Dict, List, Optional, Sequence

from tfaccel.cli.open_ports import open_ports_note
from tfaccel.errors import UserInputError

# After one worker fails, the others get this long to end on their own (TensorFlow's
# coordination service reports the dead peer to them), then they are killed.
DEFAULT_GRACE_SECONDS = 20.0
# SLURM gives no ports: every task listens on this one (one task per node) or the next ones.
DEFAULT_SLURM_PORT = 12345
_HOST_PORT = re.compile(r"^\[?[A-Za-z0-9_.:-]*[A-Za-z0-9_.-]\]?:(\d{1,5})$")


def free_ports(count: int, *, host: str = "127.0.0.1") -> List[int]:
    """`count` distinct TCP ports that are free on `host` right now."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def parse_hosts(text: str) -> List[str]:
    """``"a:1,b:2"`` as ``["a:1", "b:2"]``; a clear UserInputError for anything else."""
    hosts = [h.strip() for h in str(text).split(",") if h.strip()]
    if not hosts:
        raise UserInputError(f"--hosts must list HOST:PORT,HOST:PORT,...; got {text!r}.")
    for host in hosts:
        match = _HOST_PORT.match(host)
        if not match or not 0 < int(match.group(1)) < 65536:
            raise UserInputError(f"--hosts entry {host!r} is not HOST:PORT (port 1-65535); "
                                 f"got --hosts {text!r}.")
    if len(set(hosts)) != len(hosts):
        raise UserInputError(f"--hosts names a HOST:PORT twice: {text!r}.")
    return hosts


def tf_config(hosts: Sequence[str], index: int) -> str:
    """The TF_CONFIG of worker `index` of a cluster of `hosts` (worker 0 is the chief).

    No separate "chief" job: in a cluster of workers only, TensorFlow treats worker 0 as
    the chief (it writes checkpoints and summaries); tfaccel's runner follows the same rule.
    """
    if not 0 <= index < len(hosts):
        raise UserInputError(f"--index must be between 0 and {len(hosts) - 1} for "
                             f"{len(hosts)} hosts; got {index}.")
    return json.dumps({"cluster": {"worker": list(hosts)},
                       "task": {"type": "worker", "index": int(index)}})


def slurm_cluster(*, port: int = DEFAULT_SLURM_PORT) -> tuple:
    """``(hosts, index)`` of this SLURM task, from TensorFlow's `SlurmClusterResolver`.

    Reads SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and
    SLURM_STEP_TASKS_PER_NODE (set by ``srun``). Tasks on the same node listen on `port`,
    `port` + 1, ...

    Raises:
        UserInputError: The SLURM variables are missing or inconsistent.
    """
    import tensorflow as tf
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm

    try:
        per_node = slurm.expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"])
        # The resolver pairs every task with a GPU slot (zip over range(0, gpus, per_task)),
        # so on CPU nodes it would list no task at all: give it one slot per task, and
        # leave CUDA_VISIBLE_DEVICES alone (TensorFlow's own GPU assignment is kept when
        # there are GPUs: gpus_per_node from the environment then).
        gpus = _visible_gpus()
        slots = max(per_node)
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            port_base=port, gpus_per_node=max(gpus, slots),
            gpus_per_task=max(gpus // slots, 1), auto_set_gpu=gpus > 0)
        spec = resolver.cluster_spec().as_dict()
        task_type, task_id = resolver.get_task_info()
    except (KeyError, RuntimeError, ValueError) as error:
        raise UserInputError(
            f"cannot read the SLURM job's layout ({type(error).__name__}: {error}); run "
            "`tfaccel launch` through srun inside an sbatch job, or give --hosts and "
            "--index.") from None
    return list(spec[task_type]), int(task_id)


def _visible_gpus() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    return 0


def in_slurm_job() -> bool:
    """Whether SLURM's per-task variables are present (``srun`` sets them)."""
    return "SLURM_PROCID" in os.environ and "SLURM_STEP_NODELIST" in os.environ


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
    from tfaccel.config.recipe import load_recipe
    from tfaccel.training.run_files import check_resume_target, create_run_dir

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
    from tfaccel import datasets

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
        from tfaccel.errors import TrainingError

        raise TrainingError(f"preparing the built-in dataset in {root} failed (exit code "
                            f"{result.returncode}); see the messages above.")


def worker_command(train_args: Sequence[str]) -> List[str]:
    """The command line of one worker: this Python running tfaccel's CLI."""
    return [sys.executable, "-m", "tfaccel.cli", *train_args]


def describe_exit(code: int) -> str:
    """``code 1`` or ``signal SIGKILL`` for a Popen return code."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def shell_code(code: int) -> int:
    """A Popen return code as a process exit code (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code


class _Prefixer(threading.Thread):
    """Copies one worker's output to `out`, each line prefixed with the worker's index."""

    def __init__(self, stream: IO[str], prefix: str, out: IO[str], lock):
        super().__init__(daemon=True)
        self.stream, self.prefix, self.out, self.lock = stream, prefix, out, lock

    def run(self):
        for line in self.stream:
            with self.lock:
                self.out.write(self.prefix + line.rstrip("\n") + "\n")
                self.out.flush()
        self.stream.close()


class WorkerGroup:
    """The worker processes of one launch, started together and stopped together.

    A worker that fails makes the launch fail with its exit code: the others get
    `grace_seconds` to end on their own (TensorFlow's coordination service tells them that
    a peer is gone), then they are killed, so nothing hangs. SIGTERM or SIGINT (Ctrl-C) sent
    to the launcher reaches every worker as SIGTERM (they save a checkpoint at the same
    step and exit 143); a second one kills them.
    """

    def __init__(self, commands: Sequence[Sequence[str]], envs: Sequence[dict], *,
                 labels: Sequence[str], out: IO[str] = sys.stdout,
                 grace_seconds: float = DEFAULT_GRACE_SECONDS, servers: int = 0,
                 logs: Optional[Dict[str, Path]] = None):
        self.commands, self.envs, self.labels = list(commands), list(envs), list(labels)
        # Labels whose output goes to a file of its own instead of `out` (a local launch's
        # workers other than the chief: they print the same epochs as the chief).
        self.logs = dict(logs or {})
        # The last `servers` processes serve the others (a parameter-server cluster's ps
        # and worker tasks): their exit decides nothing (the chief tolerates a lost
        # worker and names a lost ps itself); they are stopped when the others end.
        self.servers = int(servers)
        self.out = out
        self.grace_seconds = grace_seconds
        self.processes: List[subprocess.Popen] = []
        self._threads: List[_Prefixer] = []
        self._files: List[IO[str]] = []
        # Re-entrant: the signal handler (main thread) may print while the main thread is
        # itself printing.
        self._lock = threading.RLock()
        self._signals_received = 0

    def say(self, message: str) -> None:
        """One line from the launcher itself, between the workers' lines."""
        with self._lock:
            self.out.write(f"[launch] {message}\n")
            self.out.flush()

    def run(self) -> int:
        """Starts the workers, waits for them; the launch's exit code."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, self._forward)
        try:
            for command, env, label in zip(self.commands, self.envs, self.labels):
                process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, bufsize=1,
                                           errors="replace", start_new_session=True)
                self.processes.append(process)
                if label in self.logs:
                    log = open(self.logs[label], "a", encoding="utf-8")  # closed in `finally`
                    self._files.append(log)
                    thread = _Prefixer(process.stdout, "", log, threading.Lock())
                else:
                    thread = _Prefixer(process.stdout, f"[{label}] ", self.out, self._lock)
                thread.start()
                self._threads.append(thread)
            return self._watch()
        finally:
            self._kill_all()
            for thread in self._threads:
                thread.join(timeout=5)
            for log in self._files:
                log.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _forward(self, signum, frame):
        self._signals_received += 1
        if self._signals_received == 1:
            self.say(f"{signal.Signals(signum).name} received: SIGTERM sent to every worker "
                     "(they save a checkpoint at the same step and stop); send it again to "
                     "kill them.")
            # SIGTERM for Ctrl-C too: only SIGTERM is agreed on among the workers (TF's
            # PreemptionCheckpointHandler), a SIGINT would stop each at its own step. Not
            # to the servers: the chief reads the variables from them to save.
            self._send(signal.SIGTERM, self.processes[:len(self.processes) - self.servers])
        else:
            self._send(signal.SIGKILL)

    def _send(self, signum, processes=None) -> None:
        for process in self.processes if processes is None else processes:
            if process.poll() is None:
                try:
                    process.send_signal(signum)
                except ProcessLookupError:
                    pass

    def _kill_all(self) -> None:
        self._send(signal.SIGKILL)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def _watch(self) -> int:
        first_failure = None
        failed_at = None
        reported = set()
        deciding = len(self.processes) - self.servers
        while True:
            codes = [p.poll() for p in self.processes]
            for label, code in zip(self.labels[deciding:], codes[deciding:]):
                if code is not None and label not in reported:
                    reported.add(label)
                    self.say(f"{label} exited with {describe_exit(code)}; the chief "
                             "carries on without it (a lost ps stops it with a message).")
            codes = codes[:deciding]
            if first_failure is None:
                for label, code in zip(self.labels, codes):
                    if code not in (None, 0):
                        first_failure = (label, code)
                        failed_at = time.monotonic()
                        if self._stopped_on_request(code):
                            continue  # the others are saving at the same step too
                        if any(c is None for c in codes):
                            self.say(f"{label} exited with {describe_exit(code)}"
                                     f"{self._log_note(label)}; the others stop too (killed "
                                     f"if still running after {self.grace_seconds:.0f} s).")
                        break
            if all(code is not None for code in codes):
                break
            if failed_at is not None and time.monotonic() - failed_at > self.grace_seconds:
                still = [label for label, code in zip(self.labels, codes) if code is None]
                self.say(f"killing {', '.join(still)}: still running "
                         f"{self.grace_seconds:.0f} s after {first_failure[0]} failed.")
                self._send(signal.SIGKILL, self.processes[:deciding])
                for process in self.processes[:deciding]:
                    process.wait()
                break
            time.sleep(0.2)
        self._send(signal.SIGTERM, self.processes[deciding:])
        for thread in self._threads:
            thread.join(timeout=5)
        if first_failure is None:
            return 0
        label, code = first_failure
        if self._stopped_on_request(code):
            saved = "the chief saved a checkpoint" if self.servers else \
                "every worker saved a checkpoint at the same step"
            self.say(f"stopped on request ({describe_exit(code)}); {saved}.")
        else:
            self.say(f"failed: {label} exited first with {describe_exit(code)}"
                     f"{self._log_note(label)}.")
        return shell_code(code)

    def _log_note(self, label: str) -> str:
        """Where a logged worker's output is, for a line about that worker ('' if shown)."""
        return f" (its output: {self.logs[label]})" if label in self.logs else ""

    def _stopped_on_request(self, code: int) -> bool:
        # 143/130: a worker that saved a checkpoint after the signal the launcher passed on.
        return bool(self._signals_received) and code in (128 + signal.SIGTERM,
                                                         128 + signal.SIGINT)


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
                                  ports=[_port(host) for host in hosts],
                                  runs="they run any graph or op a peer sends"))
    code = group.run()
    if code in (128 + signal.SIGTERM, 128 + signal.SIGINT) and train.run_dir:
        group.say(f"resume with: tfaccel launch --workers {workers} -- train --resume "
                  f"{train.run_dir}")
    return code


def worker_logs(labels: Sequence[str]) -> Dict[str, Path]:
    """A log file per label, in a new folder of the temporary directory (kept after the
    launch: a failed worker's messages are there)."""
    if not labels:
        return {}
    folder = Path(tempfile.mkdtemp(prefix="tfaccel-launch-logs-"))
    return {label: folder / f"{label}.log" for label in labels}


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
                                  ports=[_port(hosts[index])],
                                  runs="it runs any graph or op a peer sends"))
    return group.run()


def parameter_server_cluster(hosts: Sequence[str], *, ps: int) -> dict:
    """The TF_CONFIG cluster of a parameter-server job: chief, `ps` servers, then workers.

    ``hosts[0]`` is the chief (the coordinator: it runs tfaccel's loop and writes the run
    directory), the next `ps` hold the variables, the rest are workers.

    Raises:
        UserInputError: Too few hosts for a chief, `ps` servers and one worker.
    """
    hosts = list(hosts)
    if ps < 1 or len(hosts) < ps + 2:
        raise UserInputError(f"a parameter-server cluster needs a chief, --ps N >= 1 servers "
                             f"and at least one worker: {ps + 2} or more hosts; got --ps "
                             f"{ps} and {len(hosts)} host(s) ({', '.join(hosts)}).")
    return {"chief": hosts[:1], "ps": hosts[1:ps + 1], "worker": hosts[ps + 1:]}


def parameter_server_task(cluster: dict, index: int) -> tuple:
    """``(job, job_index)`` of host `index` in the order chief, ps..., worker..."""
    order = [(job, i) for job in ("chief", "ps", "worker") for i in range(len(cluster[job]))]
    if not 0 <= index < len(order):
        raise UserInputError(f"--index must be between 0 and {len(order) - 1} for "
                             f"{len(order)} hosts; got {index}.")
    return order[index]


def parameter_server_tf_config(cluster: dict, index: int) -> str:
    """The TF_CONFIG of host `index` (order: chief, ps..., worker...) of `cluster`."""
    job, job_index = parameter_server_task(cluster, index)
    return json.dumps({"cluster": cluster, "task": {"type": job, "index": job_index}})


def server_command() -> List[str]:
    """The command line of a ps or worker task: TensorFlow's server, serving until stopped."""
    code = ("from tfaccel.quiet_import import quiet_tensorflow; quiet_tensorflow(); "
            "from tfaccel.engine.ps_cluster import serve_task; serve_task()")
    return [sys.executable, "-c", code]


def _task_label(job: str, index: int) -> str:
    return {"chief": "chief", "ps": f"ps{index}", "worker": f"w{index}"}[job]


def run_parameter_server_local(train: TrainArgs, *, ps: int, workers: int,
                               host: str = "127.0.0.1", out: IO[str] = sys.stdout) -> int:
    """A whole parameter-server cluster on this machine: chief, `ps` servers, `workers`.

    Args:
        train: The chief's ``train ...`` arguments (the recipe's strategy must be
            parameter_server).
        ps: Parameter servers.
        workers: Workers.
        host: The address every task is reached at (127.0.0.1; another for a test host).
        out: Where the prefixed output goes.

    Returns:
        The chief's exit code (a worker lost is tolerated; a ps lost ends the chief).
    """
    if workers < 1 or ps < 1:
        raise UserInputError(f"--ps and --workers must be at least 1; got --ps {ps} "
                             f"--workers {workers}.")
    hosts = [f"{host}:{port}" for port in free_ports(ps + workers + 1, host=host)]
    cluster = parameter_server_cluster(hosts, ps=ps)
    group = _parameter_server_group(train, cluster=cluster, indices=range(len(hosts)), out=out)
    where = f"run directory {train.run_dir}" if train.run_dir else "the run directory"
    group.say(f"chief on {hosts[0]}, {ps} ps on {', '.join(cluster['ps'])}, {workers} "
              f"worker(s) on {', '.join(cluster['worker'])}; the chief writes {where}.")
    group.say(open_ports_note(server="the cluster's TensorFlow gRPC servers",
                              ports=[_port(h) for h in hosts],
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
                              ports=[_port(hosts[index])],
                              runs="it runs any graph or op a peer sends"))
    return group.run()


def _parameter_server_group(train: TrainArgs, *, cluster: dict, indices,
                            out: IO[str]) -> WorkerGroup:
    """The processes of `indices` (chief first, when it is one of them)."""
    commands, envs, labels = [], [], []
    for index in indices:
        job, job_index = parameter_server_task(cluster, index)
        env = dict(os.environ)
        env["TF_CONFIG"] = parameter_server_tf_config(cluster, index)
        commands.append(worker_command(train.args) if job == "chief" else server_command())
        envs.append(env)
        labels.append(_task_label(job, job_index))
    servers = sum(label != "chief" for label in labels)
    # A node that runs only a server (--hosts) waits for it: it decides its own exit.
    return WorkerGroup(commands, envs, labels=labels, out=out,
                       servers=servers if "chief" in labels else 0)


def _port(host: str) -> int:
    """The port of a ``HOST:PORT`` entry (``[v6]:PORT`` included)."""
    return int(host.rsplit(":", 1)[1])

"""The TF_CONFIG of each process of a launch: from --workers (free local ports), --hosts/--index or
SLURM, for a cluster of workers or of a chief, parameter servers and workers; no TensorFlow
at import."""

from __future__ import annotations

import json
import os
import re
import socket
from typing import List, Sequence

from tfaccel.errors import UserInputError

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
    # TensorFlow (seconds) only under SLURM: a --workers or --hosts launch and the CLI's
    # other commands never load it in the launcher's process.
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


def host_port(host: str) -> int:
    """The port of a ``HOST:PORT`` entry (``[v6]:PORT`` included)."""
    return int(host.rsplit(":", 1)[1])

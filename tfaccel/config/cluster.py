"""THE cluster rule, TF-free: who the workers are and which one is the chief, from TF_CONFIG.

TensorFlow orders a cluster's tasks as the "chief" job's (if any) then the "worker" job's,
and the first is the chief (it writes checkpoints and summaries). The runner's role, the
"auto" strategy choice, the data sharding and the parameter-server engine all ask here:
TF_CONFIG is read in this module only, so the rule exists once.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import List, Mapping, Optional, Tuple

from tfaccel.errors import UserInputError

# Jobs that take part in the all-reduce, in TensorFlow's order; evaluators do not.
TRAINING_JOBS = ("chief", "worker")
# The jobs of a parameter-server cluster, as TensorFlow names them in TF_CONFIG.
PARAMETER_SERVER_JOBS = ("chief", "ps", "worker")


def task_order(cluster: Mapping) -> List[Tuple[str, int]]:
    """The ``(job, index)`` of every training task of `cluster`, the chief first."""
    return [(job, i) for job in TRAINING_JOBS for i in range(len(cluster.get(job) or ()))]


def _tf_config() -> dict:
    """TF_CONFIG as a mapping (``cluster``, ``task``); empty when it is unset.

    Raises:
        UserInputError: TF_CONFIG is not JSON with a ``cluster`` object.
    """
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        return {}
    try:
        config = json.loads(raw)
        if not isinstance(config.get("cluster", {}), dict):
            raise ValueError("'cluster' is not an object")
    except (ValueError, AttributeError) as error:
        raise UserInputError(
            f"TF_CONFIG is not valid JSON with a 'cluster' object ({error}): {raw[:200]!r}"
        ) from None
    return config


def tf_config_tasks() -> int:
    """Number of training tasks (chief + workers) TF_CONFIG names; 0 when it is unset."""
    return len(task_order(_tf_config().get("cluster", {})))


def training_addresses() -> List[Tuple[str, str]]:
    """``(task name, "host:port")`` of every training task TF_CONFIG names, the chief first
    (the order of `task_order` and of `worker_role`'s index); empty when it is unset."""
    cluster = _tf_config().get("cluster", {})
    return [(f"{job} {i}", str(cluster[job][i])) for job, i in task_order(cluster)]


def read_parameter_server_cluster() -> dict:
    """The ``cluster`` of TF_CONFIG, checked to be a parameter-server cluster.

    Raises:
        UserInputError: TF_CONFIG is unset, or lacks a chief, a ps or a worker job.
    """
    config = _tf_config()
    if not config:
        raise UserInputError(
            "runtime.strategy parameter_server needs a cluster: TF_CONFIG is not set. Start "
            "the job with `tfaccel launch --ps N --workers M -- train RECIPE`.")
    cluster = config.get("cluster", {})
    missing = [job for job in PARAMETER_SERVER_JOBS if not cluster.get(job)]
    if missing:
        raise UserInputError(
            f"runtime.strategy parameter_server needs a chief, at least one ps and one "
            f"worker in TF_CONFIG's cluster; it has no {', '.join(missing)} (jobs: "
            f"{sorted(cluster)}). Start the job with `tfaccel launch --ps N --workers M`.")
    return cluster


def serving_task() -> Tuple[dict, str, int]:
    """This process's ``(cluster, job, index)`` as a parameter-server task (ps or worker).

    Raises:
        UserInputError: TF_CONFIG names no ps or worker task for this process.
    """
    config = _tf_config()
    task = config.get("task", {})
    if task.get("type") not in ("ps", "worker"):
        raise UserInputError(f"a parameter-server task must be ps or worker in TF_CONFIG; "
                             f"got task {task!r}.")
    return config["cluster"], task["type"], int(task["index"])


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    """This process's place in a job: alone, or worker `index` of `count` (0 = chief)."""

    index: int = 0
    count: int = 1

    @property
    def multi_worker(self) -> bool:
        """Whether several workers train together."""
        return self.count > 1

    @property
    def chief(self) -> bool:
        """Whether this process writes the run directory (worker 0, or the only one)."""
        return self.index == 0


def worker_role(strategy: str) -> WorkerRole:
    """This process's role from TF_CONFIG, by TensorFlow's own rule (TF-free).

    The chief is task 0 of a "chief" job when the cluster has one, else worker 0. Only
    `strategy` "multi_worker" and "auto" (which picks multi_worker under a TF_CONFIG of
    several tasks) make a multi-worker run; any other kind trains alone.
    """
    if strategy not in ("auto", "multi_worker"):
        return WorkerRole()
    config = _tf_config()
    if not config:
        return WorkerRole()
    try:
        task = config.get("task", {})
        order = task_order(config.get("cluster", {}))
        count = len(order)
        index = order.index((task.get("type"), int(task.get("index", 0)))) if count else 0
    except (ValueError, AttributeError, TypeError) as error:
        raise UserInputError(f"TF_CONFIG does not name this task in its cluster "
                             f"({error}): {os.environ.get('TF_CONFIG', '')[:200]!r}") from None
    return WorkerRole(index=index, count=max(count, 1))


def strategy_role(strategy) -> WorkerRole:
    """This process's role in `strategy`'s cluster: THE "is this multi-worker" rule.

    Several workers only under a MultiWorkerMirroredStrategy whose cluster names more than
    one training task; any other strategy, and a MultiWorkerMirroredStrategy without a
    cluster (one worker, no TF_CONFIG), trains alone. The index is TensorFlow's own (the
    chief first, then the workers): the ``input_pipeline_id`` that
    `distribute_datasets_from_function` gives this worker.

    Args:
        strategy: A `tf.distribute.Strategy` (the default strategy included).

    Returns:
        The `WorkerRole`; ``.multi_worker`` says whether several workers train together.
    """
    # Imported here, not at the top: config/ stays TensorFlow-free, and a strategy
    # exists only once TensorFlow is loaded.
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return WorkerRole()
    resolver = strategy.cluster_resolver
    order = task_order(resolver.cluster_spec().as_dict() if resolver is not None else {})
    if len(order) < 2:
        return WorkerRole()
    task = (getattr(resolver, "task_type", None), getattr(resolver, "task_id", None))
    return WorkerRole(index=order.index(task) if task in order else 0, count=len(order))


def is_multi_worker(strategy) -> bool:
    """Whether several workers train together under `strategy` (see `strategy_role`)."""
    return strategy_role(strategy).multi_worker


# What a process of a TF_CONFIG cluster does under `tfaccel train` (`cluster_task`).
ALONE = "alone"  # no cluster, or a cluster of one training task
TRAINING = "training"  # a chief or worker of a MultiWorkerMirroredStrategy cluster
PARAMETER_SERVER_CHIEF = "parameter_server_chief"  # runs the coordinator's loop
SERVING = "serving"  # a ps or worker task of a parameter-server cluster: serves the chief
EVALUATOR = "evaluator"  # evaluates the chief's checkpoints beside the cluster
_TASK_TYPES = ("chief", "worker", "ps", "evaluator")


@dataclasses.dataclass(frozen=True)
class ClusterTask:
    """This process's part in TF_CONFIG's cluster: `kind` (one of the names above), the
    task's `job` and `index` as TF_CONFIG gives them (None and 0 without TF_CONFIG), and
    the cluster's jobs (evaluators are never a training task, listed or not)."""

    kind: str
    job: Optional[str] = None
    index: int = 0
    cluster: Mapping = dataclasses.field(default_factory=dict)

    @property
    def chief_address(self) -> Optional[str]:
        """HOST:PORT of the chief (a "chief" job's task 0, else worker 0), or None."""
        job, index = (task_order(self.cluster) or [(None, 0)])[0]
        return str(self.cluster[job][index]) if job is not None else None


def cluster_task() -> ClusterTask:
    """What this process is in TF_CONFIG's cluster, for every shape the platforms set.

    Kubeflow's TFJob and Vertex AI set TF_CONFIG per process: a `chief` and `worker` job
    (or workers only: worker 0 is the chief), `ps` for parameter-server training, and an
    `evaluator` task, which TFJob lists in the cluster or leaves out (it is never a
    training task either way). Fields besides ``cluster`` and ``task`` (Vertex AI's
    ``job`` and ``environment: cloud``, the task's ``trial``) are not read.

    Raises:
        UserInputError: TF_CONFIG is not JSON, its task type is none of chief, worker, ps,
            evaluator, or its task is not in its cluster.
    """
    config = _tf_config()
    if not config:
        return ClusterTask(ALONE)
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    raw = os.environ.get("TF_CONFIG", "")[:200]
    if not isinstance(task, dict):
        raise UserInputError(f"TF_CONFIG's task is not an object: {raw!r}")
    job = task.get("type")
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise UserInputError(f"TF_CONFIG's task index {task.get('index')!r} is not a "
                             f"number: {raw!r}") from None
    if job is None and len(task_order(cluster)) < 2:
        return ClusterTask(ALONE, cluster=cluster)
    if job not in _TASK_TYPES:
        raise UserInputError(f"TF_CONFIG's task type {job!r} is none of "
                             f"{', '.join(_TASK_TYPES)}: {raw!r}")
    if job == "evaluator":
        return ClusterTask(EVALUATOR, job, index, cluster)
    tasks = cluster.get(job) or []
    if not isinstance(tasks, list) or not 0 <= index < len(tasks):
        raise UserInputError(f"TF_CONFIG does not name this task in its cluster (task "
                             f"{job} {index}; the cluster's {job} job has {len(tasks)} "
                             f"task(s)): {raw!r}")
    if cluster.get("ps"):
        kind = PARAMETER_SERVER_CHIEF if job == "chief" else SERVING
        return ClusterTask(kind, job, index, cluster)
    if job == "ps":
        raise UserInputError(f"TF_CONFIG's task is ps but its cluster has no ps job: {raw!r}")
    kind = TRAINING if len(task_order(cluster)) > 1 else ALONE
    return ClusterTask(kind, job, index, cluster)


def check_strategy_for_cluster(task: ClusterTask, strategy: str) -> None:
    """A recipe's `runtime.strategy` against the cluster it runs in.

    Raises:
        UserInputError: The cluster has parameter servers and the strategy is not
            parameter_server (MultiWorkerMirroredStrategy would count the chief and the
            workers as its own and wait for ps tasks that never join it).
    """
    if task.kind in (PARAMETER_SERVER_CHIEF, SERVING) and strategy != "parameter_server":
        raise UserInputError(
            f"TF_CONFIG's cluster has parameter servers ({len(task.cluster['ps'])} ps "
            f"task(s)), so every task trains with runtime.strategy parameter_server; this "
            f"recipe's runtime.strategy is {strategy!r}. Set runtime.strategy: "
            "parameter_server (or give this job a cluster without a ps job).")

"""How a multi-worker job splits the input: by file before the stream, else by element."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

import tensorflow as tf

from tfaccel.config import cluster
from tfaccel.data.tail.spec import UNSET, TailOptions


def multi_worker_in_scope() -> bool:
    """Whether several workers train together under the strategy in scope
    (`tfaccel.config.cluster.is_multi_worker`)."""
    return tf.distribute.has_strategy() and cluster.is_multi_worker(tf.distribute.get_strategy())


def order_must_be_fixed(strategy=None) -> bool:
    """THE rule: element (DATA) sharding among workers needs a fixed element order.

    Under MultiWorkerMirroredStrategy a source without files to divide (arrays, image-folder
    paths, Python sources) is split by element: each worker keeps every k-th element of the
    same pipeline, which TensorFlow documents as unsafe with a non-deterministic order
    (workers could overlap or miss examples). Builders ask it through
    `fix_order_for_data_sharding`, the runner through
    `training.model_setup.inputs.input_order_is_fixed`.

    Args:
        strategy: The `tf.distribute` strategy the input is built for; None: the one in
            scope (none in scope: one process, any order is safe).
    """
    if strategy is None:
        return multi_worker_in_scope()
    return cluster.is_multi_worker(strategy)


def fix_order_for_data_sharding(options: TailOptions) -> TailOptions:
    """Forces ``deterministic=True`` when a multi-worker strategy will shard by element.

    `experimental_distribute_dataset` under MultiWorkerMirroredStrategy gives each worker every
    k-th element of its own copy of the pipeline (DATA sharding); TensorFlow documents that
    as unsafe with a non-deterministic order (workers may overlap or miss examples). With an
    `input_context` the pipeline shards by index before any shuffle or parallel stage, so
    the caller's choice holds there.

    Args:
        options: The tail options a source hands the tail.

    Returns:
        `options`, or a copy with ``deterministic=True``.
    """
    if options.resolved().input_context is None and order_must_be_fixed():
        return dataclasses.replace(options, deterministic=True)
    return options


def worker_of(strategy) -> Tuple[int, int]:
    """``(index, count)`` of this worker in `strategy`'s cluster; ``(0, 1)`` alone.

    The index is TensorFlow's own (the chief first, then the workers): the
    ``input_pipeline_id`` that `distribute_datasets_from_function` gives this worker
    (`tfaccel.config.cluster.strategy_role`).
    """
    role = cluster.strategy_role(strategy)
    return role.index, role.count


def workers_in_scope() -> int:
    """Workers of the multi-worker strategy in scope (1 without one)."""
    if not multi_worker_in_scope():
        return 1
    return worker_of(tf.distribute.get_strategy())[1]


def worker_in_scope() -> Tuple[int, int]:
    """``(index, count)`` of this worker under the strategy in scope (``(0, 1)`` alone)."""
    if not multi_worker_in_scope():
        return 0, 1
    return worker_of(tf.distribute.get_strategy())


def choose_file_policy(options: TailOptions, *, num_files: int,
                       sharded: bool = False) -> TailOptions:
    """The auto-shard policy of a file source: OFF, FILE (AUTO) or DATA.

    - `sharded`: the source already kept only this worker's files (an input context):
      OFF, so TensorFlow does not split the share a second time.
    - A resumable stream (`options.stream`): DATA. TensorFlow's rewrite finds no
      reader it can split inside the stream's per-pass ``flat_map``; a stream is split by
      file before it is built (the runner's input context), or by element here.
    - Fewer files than workers: DATA. TensorFlow's AUTO policy does not fall back by
      itself: it fails ("Could not apply FILE based sharding: the dataset only has 1
      file(s)"), as the built-in dataset's one file per split does on 2 workers.
    - Otherwise AUTO (FILE: a reader dataset is there to split).

    Args:
        options: The tail options a file source hands the tail; a shard policy the
            caller chose (`TailOptions.chosen`) is kept.
        num_files: Files the source reads.
        sharded: Whether the source already split its files by an input context.

    Returns:
        `options` with the policy (and with DATA, the order `fix_order_for_data_sharding`
        needs).
    """
    if options.chosen().shard_policy is not UNSET:
        return options
    resolved = options.resolved()
    if sharded or resolved.input_context is not None:
        return dataclasses.replace(options, shard_policy="off")
    workers = workers_in_scope()
    if workers > 1 and (num_files < workers or resolved.stream is not None):
        return fix_order_for_data_sharding(dataclasses.replace(options, shard_policy="data"))
    return dataclasses.replace(options, shard_policy="auto")


@dataclasses.dataclass(frozen=True)
class FileShares:
    """Whether a file source's files can be divided among workers, and how.

    Worker i reads files i, i + n, i + 2n, ... (TensorFlow's and TFDS's own round-robin
    rule for an input context). The workers train in lock-step (a collective every step),
    so every worker must make the same number of steps from its share per pass; when the
    shares cannot, `reason` says why and the job splits by element instead.

    Attributes:
        workers: Workers in the job.
        counts: Examples of each file, in read order (None: unknown).
        per_worker_batch: Examples one worker trains on per step.
        steps_per_pass: Steps per pass, the same for every worker (None: not by file).
        reason: Why the files are not divided (None: they are).
        what: The files, for messages (e.g. "TFRecord files").
    """

    workers: int
    counts: Optional[Tuple[int, ...]]
    per_worker_batch: int
    steps_per_pass: Optional[int]
    reason: Optional[str]
    what: str = "files"

    @property
    def by_file(self) -> bool:
        """Whether each worker reads only its own files."""
        return self.reason is None

    def files_of(self, worker: int) -> Tuple[int, ...]:
        """Indices (in read order) of the files `worker` reads."""
        return tuple(range(worker, len(self.counts or ()), self.workers))

    def examples_of(self, worker: int) -> int:
        """Examples in `worker`'s files."""
        return sum(self.counts[i] for i in self.files_of(worker))

    def describe(self, worker: int) -> str:
        """One log line for `worker`: its share, or why every worker reads every file."""
        if self.by_file:
            files = self.files_of(worker)
            return (f"{len(self.counts)} {self.what} divided among {self.workers} workers: "
                    f"worker {worker} reads {len(files)} of them ({self.examples_of(worker)} "
                    f"examples); every worker makes {self.steps_per_pass} steps of "
                    f"{self.per_worker_batch} examples per pass.")
        return (f"{self.what} not divided among {self.workers} workers ({self.reason}): every "
                "worker reads every file and keeps its share by element.")


def plan_file_shares(counts: Optional[Sequence[int]], *, workers: int, global_batch_size: int,
                     what: str = "files") -> FileShares:
    """Decides whether `workers` can each read a disjoint share of files in lock-step.

    Each worker trains on ``global_batch_size / workers`` examples per step. File sharding
    is chosen when every worker has a file and every share gives the same number of full
    steps per pass; each worker drops the rest of its share in a pass (under its per-worker
    batch, as one process drops a partial global batch). Unequal shares are not balanced
    by dropping more: without shuffling the same examples would never be trained on.

    Args:
        counts: Examples of each file in read order, or None when unknown.
        workers: Workers in the job (> 1).
        global_batch_size: Examples per step over all workers (a multiple of `workers`).
        what: The files, for messages.

    Returns:
        The `FileShares`.
    """
    per_worker = global_batch_size // workers
    counts = None if counts is None else tuple(int(c) for c in counts)

    def refuse(reason):
        return FileShares(workers=workers, counts=counts, per_worker_batch=per_worker,
                          steps_per_pass=None, reason=reason, what=what)

    if counts is None:
        return refuse("the examples in each file are not known")
    if len(counts) < workers:
        return refuse(f"{len(counts)} file(s) for {workers} workers")
    shares = [sum(counts[w::workers]) for w in range(workers)]
    steps = [share // per_worker for share in shares]
    if len(set(steps)) > 1:
        listed = ", ".join(f"{n} examples ({s} steps)" for n, s in zip(shares, steps))
        return refuse(f"the workers' shares hold {listed} at {per_worker} examples per "
                      "worker per step; unequal steps would put the workers out of step; "
                      "files of equal size divide the reading")
    if steps[0] == 0:
        return refuse(f"a share of {min(shares)} examples is less than one step of "
                      f"{per_worker}")
    return FileShares(workers=workers, counts=counts, per_worker_batch=per_worker,
                      steps_per_pass=steps[0], reason=None, what=what)

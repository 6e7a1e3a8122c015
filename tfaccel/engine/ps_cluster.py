"""TensorFlow's parameter-server engine for Keras 3: the strategy, the coordinator, the tasks that serve."""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from typing import Callable, List, Optional

import tensorflow as tf
from tensorflow.python.distribute import input_lib
from tensorflow.python.distribute.coordinator import values

from tfaccel.config.cluster import read_parameter_server_cluster, serving_task
from tfaccel.errors import TrainingError

# Why no `variable_partitioner`: Keras 3 wraps each tf.Variable in its own keras.Variable,
# and TensorFlow's GradientTape cannot differentiate through a ShardedVariable held inside
# one (tried with TF 2.21 / Keras 3.15: "AttributeError: 'ShardedVariable' object has no
# attribute 'handle'" in tape.gradient, for Embedding and Dense alike). Gradients taken of
# the shards get past the tape, but Keras' optimizer updates through extended.update, which
# refuses it: "ShardedVariable doesn't support being used as a reference". Large tables are
# split by engine/layer_sharding.py instead: K plain Keras variables, dealt round-robin.


# TensorFlow reads gRPC's channel options from this variable once, at its first channel.
GRPC_OPTIONS_VARIABLE = "TF_GRPC_DEFAULT_OPTIONS"
# Without keepalive pings a call to a peer whose link was cut waits for TCP's own timeout
# (tried across network namespaces: a run still stuck 4 minutes after a worker's link was
# cut); this bound (runtime.peer_timeout's default, as for multi_worker) is what they give.
DEFAULT_PEER_TIMEOUT_SECONDS = 10.0


def keepalive_options(seconds: float) -> str:
    """gRPC options that fail a call within about `seconds` of its peer going silent.

    A ping after half of `seconds` without traffic, the connection closed (the call
    UNAVAILABLE) when it is not answered within the other half; pings are allowed while
    no data flows, which is exactly when a cut link is silent.
    """
    half = max(int(seconds * 500), 500)
    return (f"grpc.keepalive_time_ms={half},grpc.keepalive_timeout_ms={half},"
            "grpc.http2.max_pings_without_data=0")


def bound_peer_silence(seconds: Optional[float] = None) -> None:
    """Sets this process's gRPC keepalive (`keepalive_options`) before TensorFlow's first
    channel; a TF_GRPC_DEFAULT_OPTIONS of the user's is kept as it is."""
    os.environ.setdefault(GRPC_OPTIONS_VARIABLE,
                          keepalive_options(seconds or DEFAULT_PEER_TIMEOUT_SECONDS))


def make_parameter_server_strategy(*, peer_timeout: Optional[float] = None):
    """A `tf.distribute.ParameterServerStrategy` over TF_CONFIG's cluster (run on the chief).

    Args:
        peer_timeout: Seconds after which a silent worker or parameter server counts as
            unreachable (`bound_peer_silence`); None for 10.

    Returns:
        The strategy; models built in its scope keep their variables on the parameter
        servers. No variable partitioner (the comment above says why; large
        tables and Dense kernels are split by engine/layer_sharding.py).
    """
    read_parameter_server_cluster()  # a clear error before TensorFlow's own
    bound_peer_silence(peer_timeout)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.ParameterServerStrategy(resolver)


def serve_task(*, poll_seconds: float = 2.0) -> None:
    """Runs this process's ps or worker server from TF_CONFIG until the chief is gone.

    A parameter-server cluster's ps and worker tasks run no Python of their own: the
    chief sends them the variables, the datasets and the step functions. TensorFlow's
    server never ends by itself, so a task on its own machine (``--hosts``, SLURM) would
    outlive the job: once the chief's port has answered, a task whose chief stops
    answering it ends with exit code 0. A signal ends it too (the server blocks in C++,
    so by the signal's default action: SIGTERM gives 143).

    Args:
        poll_seconds: How often the chief's port is tried.
    """
    cluster, job, index = serving_task()
    bound_peer_silence()  # a worker's calls to a cut parameter server fail, not hang
    told = _ChiefsRunDir()
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job,
                                  task_index=index, protocol="grpc", start=True)
    name = f"{job} {index}"
    print(f"{name} serving on {cluster[job][index]} (pid {os.getpid()})", flush=True)
    chief = cluster["chief"][0]
    threading.Thread(target=_end_after_chief, args=(chief, name, poll_seconds, told),
                     daemon=True).start()
    server.join()


# How the chief's run directory reaches a serving task: a line the chief prints in the
# task's own standard output (`tell_run_dir`), which the task takes out of its output.
RUN_DIR_MARK = "tfaccel-chief-run-dir\t"


def tell_run_dir(run_dir, devices) -> None:
    """Tells each serving task the run directory the chief writes, for its closing line.

    A ps or worker task runs no Python of the chief's, but runs the ops the chief places on
    it: a `tf.print` placed there prints in that task's own output, where `serve_task`
    takes it out. A task that does not answer is skipped (it names none).

    Args:
        run_dir: The chief's run directory.
        devices: The tasks, as ``/job:ps/replica:0/task:0``, ...
    """
    for device in devices:
        try:
            with tf.device(device):
                tf.print(RUN_DIR_MARK + str(run_dir), output_stream=sys.stdout)
        except (tf.errors.OpError, ValueError):
            pass


class _ChiefsRunDir:
    """This process's standard output through a pipe: every line passed on, except the
    chief's `tell_run_dir` line, kept as `run_dir`."""

    def __init__(self):
        self.run_dir: Optional[str] = None
        try:
            sys.stdout.flush()
            self._out = os.dup(1)
            read, write = os.pipe()
            os.dup2(write, 1)
            os.close(write)
        except OSError:  # no standard output to take lines from: the line names none
            self._out = None
            return
        threading.Thread(target=self._copy, args=(read,), daemon=True).start()

    def _copy(self, read: int) -> None:
        mark = RUN_DIR_MARK.encode()
        with os.fdopen(read, "rb") as pipe:
            for line in pipe:
                if line.startswith(mark):
                    self.run_dir = line[len(mark):].decode("utf-8", "replace").strip()
                    continue
                try:
                    os.write(self._out, line)
                except OSError:  # nobody reads our output any more: keep the pipe drained
                    pass

    def say(self, text: str) -> None:
        """`text` as a line of the real standard output (the copying thread may be gone)."""
        sys.stdout.flush()
        data = (text + "\n").encode("utf-8", "replace")
        os.write(self._out if self._out is not None else 1, data)


# Until the chief first answers, its port is tried this often: a short job's chief (a warm
# start, a few steps) can come and go between two tries every `poll_seconds`, and a task
# that never saw it would then serve forever.
FIRST_ANSWER_POLL_SECONDS = 0.1


def _end_after_chief(chief: str, name: str, poll_seconds: float, told: _ChiefsRunDir) -> None:
    """Ends the process (exit 0) once `chief` answered and then stopped answering twice."""
    host, port = chief.rsplit(":", 1)
    host = host.strip("[]")
    seen, misses = False, 0
    while True:
        # The chief's line in this task's output says it was up, even unseen by a try.
        seen = seen or told.run_dir is not None
        try:
            with socket.create_connection((host, int(port)), timeout=poll_seconds):
                seen, misses = True, 0
        except OSError:
            misses += 1
        if seen and misses >= 2:
            wrote = f" The chief wrote the run directory: {told.run_dir}" if told.run_dir \
                else " (the chief named no run directory to this task)"
            told.say(f"{name}: the chief ({chief}) is gone; stopping.{wrote}")
            os._exit(0)  # the server thread blocks in C++ and cannot be asked to stop
        time.sleep(poll_seconds if seen else min(poll_seconds, FIRST_ANSWER_POLL_SECONDS))


def per_worker_iterators(coordinator, make_dataset: Callable[[], tf.data.Dataset], *,
                         positions: Optional[tf.Variable] = None):
    """One iterator per worker, worker i reading batches i, i + n, ... of one stream.

    The stream is built once here (the same tfaccel builders as any run) and its graph
    sent to every worker, each keeping its own share. TensorFlow's own
    `create_per_worker_dataset` gives every worker the same dataset (it has no worker
    index); this is its code with the index added.

    Args:
        coordinator: The `ClusterCoordinator`.
        make_dataset: Builds the stream (called once, on the chief).
        positions: A variable on the parameter servers holding, per worker, how many
            batches of its share its steps have taken (the step adds them). Given, each
            element is ``(batch, worker index)``, and an iterator that TensorFlow rebuilds
            after its worker restarted skips the batches its worker already took: without
            it the restarted worker would read its share again from the start.

    Returns:
        The `PerWorkerValues` of iterators to pass to `coordinator.schedule`.
    """
    # The private parts are the ones create_per_worker_dataset itself uses.

    dataset = make_dataset()
    spec = dataset.element_spec
    serialized = values.serialize_dataset_to_graph(dataset)
    workers = coordinator._cluster.workers  # see the docstring
    count = len(workers)

    def tagged(shard, index):
        return tf.data.Dataset.zip(
            (shard, tf.data.Dataset.from_tensors(tf.constant(index, tf.int32)).repeat()))

    results = []
    for index, worker in enumerate(workers):
        def make_iterator(index=index):
            shard = values.deserialize_dataset_from_graph(serialized, spec).shard(count, index)
            if positions is None:
                return iter(shard)
            # Read when TensorFlow (re)builds the iterator: 0 at the start, the batches
            # already taken after the worker came back.
            return iter(tagged(shard.skip(positions[index]), index))

        results.append(worker.create_resource(tf.function(make_iterator)))
    shown = dataset if positions is None else tagged(dataset, 0)
    iterator_spec = input_lib.get_iterator_spec_from_dataset(coordinator.strategy, shown)
    for remote in results:
        remote._type_spec = iterator_spec  # as TensorFlow's own code does
    return values.PerWorkerDistributedIterator(tuple(results))


def take_position(positions: tf.Variable, worker: tf.Tensor) -> None:
    """Counts one batch taken by `worker` (inside a step; see `per_worker_iterators`).

    A scatter add: one worker's count is never lost to another's concurrent update (unlike
    Keras' ``assign(self + value)``), and only that worker's steps touch it.
    """
    positions.scatter_add(tf.IndexedSlices(tf.ones([1], positions.dtype),
                                           tf.reshape(worker, [1])))


class StepCounter:
    """THE step count of a parameter-server run: scheduled closures that completed.

    Keras 3's ``optimizer.iterations`` is read and written by every worker at once and
    loses increments (158 of 200 steps counted in a try with 2 workers); the coordinator
    knows exactly how many closures it scheduled and saw complete (a closure re-run after
    a worker failed is still one closure).
    """

    def __init__(self, start: int = 0):
        self.completed = int(start)

    def add(self, closures: int) -> int:
        """Counts `closures` that `coordinator.join()` saw complete; the new count."""
        self.completed += int(closures)
        return self.completed


def lost_ps_task(error: BaseException) -> Optional[str]:
    """The ``/job:ps/replica:0/task:N`` a TensorFlow error names, or None."""

    message = getattr(error, "message", None) or str(error)
    match = re.search(r"/job:ps/replica:\d+/task:\d+", message)
    return match.group(0) if match else None


def lost_parameter_server(error: BaseException, *, step: int, run_dir,
                          cluster: Optional[dict] = None) -> Optional[TrainingError]:
    """A lost parameter server as one clear TrainingError (None for any other error).

    A lost worker never reaches here: the coordinator runs its closures elsewhere.
    `cluster` (TF_CONFIG's) gives the server's HOST:PORT.
    """
    if not isinstance(error, (tf.errors.UnavailableError, tf.errors.AbortedError,
                              tf.errors.CancelledError, tf.errors.InternalError,
                              tf.errors.NotFoundError, tf.errors.FailedPreconditionError)):
        return None
    task = lost_ps_task(error)
    if task is None:
        return None
    servers = (cluster or {}).get("ps") or []
    index = int(task.rsplit(":", 1)[1])
    name = f"{servers[index]} ({task})" if index < len(servers) else task
    return TrainingError(
        f"parameter server {name} is unreachable (TensorFlow: {type(error).__name__}): "
        f"its link is down or it stopped; the variables it held are lost, so the run "
        f"stopped after {step} completed step(s). Workers may come and go, parameter "
        f"servers may not. When every host reaches the others again, restart the whole "
        f"cluster and continue from the last checkpoint with `-- train --resume {run_dir}` "
        f"(`tfaccel launch --ps N --workers M`, or on each host the same `tfaccel launch "
        f"--ps N --hosts ... --index I`).")


def worker_names(coordinator) -> List[str]:
    """The worker devices of the coordinator's cluster, in order."""
    return [w.device_name for w in coordinator._cluster.workers]

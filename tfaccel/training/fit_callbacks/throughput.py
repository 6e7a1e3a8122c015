"""Per-epoch throughput, input wait, CPU use and peak memory of `fit` (a Keras callback)."""

from __future__ import annotations

import os
import resource
import time
from typing import Optional

import keras
import tensorflow as tf

from tfaccel.config import cluster
from tfaccel.engine.determinism import op_determinism_enabled
from tfaccel.messages import say

# Keys this callback adds to each epoch's logs (metrics.jsonl, TensorBoard, summary.json).
THROUGHPUT_KEYS = ("steps_per_sec", "step_time_ms", "input_wait_fraction",
                   "cpu_utilisation", "cpu_cores_used", "peak_rss_mb", "peak_device_mb")


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class ThroughputMonitor(keras.callbacks.Callback):
    """Adds throughput, input wait, CPU utilisation and peak memory to every epoch's logs.

    Placed before the metrics logger and TensorBoard in the callback list, its figures land
    in metrics.jsonl and as TensorBoard scalars like any metric.

    How the input wait is measured. Keras 3 pulls the next batch (the iterator's
    `get_next`) inside its compiled train function, also with `steps_per_execution > 1`,
    so Python cannot time the `next` call itself. Instead `attach` wraps the model's
    `train_step` with two in-graph timestamps: one taken when the batch has arrived in the
    step, one after the step's outputs and weight updates. Their sum over an epoch is the
    compute time; the time in the train function calls (timed from Python) minus the compute
    time is the time spent waiting for input. `input_wait_fraction` is that wait over the
    time in the train function calls: the iterator's `get_next` plus TensorFlow's
    per-call dispatch (tens of microseconds; it shows as a floor of a few tenths of a
    percent on a cached pipeline), not the callbacks between calls. Calls that traced the
    function (the first one, a retrace for a last partial batch) are left out.

    `input_wait_fraction` is None where this cannot be measured: with `jit_compile`
    (XLA cannot compile the timestamp op), under op determinism (`runtime.deterministic`:
    TensorFlow refuses timestamps there) and under MultiWorkerMirroredStrategy with several
    workers (reading the per-replica timer would be a collective across workers inside a
    callback).
    """

    def __init__(self, *, steps_per_execution: int = 1):
        super().__init__()
        self.steps_per_execution = steps_per_execution
        self.unavailable_reason: Optional[str] = None
        self._compute = None  # in-graph seconds of compute, summed (a tf.Variable)
        self._traces = 0
        # Seconds of the calls that traced, beyond their in-graph input wait and step: the
        # tracing and compiling (over the run; `steps_per_execution: auto` weighs a
        # retrace by it).
        self.trace_seconds = 0.0
        self._cores = available_cores()
        self._reset_epoch()

    def attach(self, model, *, strategy=None) -> None:
        """Wraps `model.train_step` with the in-graph step timer; call before `fit`.

        Args:
            model: The Keras model `fit` is called on (the accumulation wrapper if any).
            strategy: The distribution strategy the model was built under (None: default).
        """

        if model.jit_compile:
            self.unavailable_reason = "jit_compile (XLA has no timestamp op)"
            return

        if op_determinism_enabled():
            # TensorFlow refuses to run a timestamp op under op determinism.
            self.unavailable_reason = "runtime.deterministic (op determinism forbids timestamps)"
            return
        strategy = strategy or tf.distribute.get_strategy()
        if cluster.is_multi_worker(strategy):
            self.unavailable_reason = "MultiWorkerMirroredStrategy"
            return
        with strategy.scope():
            # Per replica (averaged on read): [input wait s, compute s, last step end, steps].
            self._compute = tf.Variable(
                tf.zeros([4], tf.float64), trainable=False, name="tfaccel_step_timer",
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.MEAN)
        original = model.train_step
        timer = self._compute

        def timed_train_step(data):
            self._traces += 1  # Python runs only while tracing: marks calls that traced
            # Read at trace time: `steps_per_execution: auto` retraces with its choice.
            per_call = float(max(self.steps_per_execution, 1))
            # Keras inlines this step into its train function, so a timestamp without inputs
            # runs as soon as the function starts, while the batch is still being fetched.
            entry = tf.timestamp()
            # Control dependencies, not program order: a timestamp touches no resource, so
            # TensorFlow would be free to run it before the batch or the updates are done.
            with tf.control_dependencies(tf.nest.flatten(data)):
                start = tf.timestamp()
            logs = original(data)
            done = tf.nest.flatten(logs) + [tf.convert_to_tensor(v)
                                            for v in model.trainable_variables]
            with tf.control_dependencies(done):
                end = tf.timestamp()
            state = timer.read_value()
            # With steps_per_execution > 1 Keras fetches the next batch inside its loop, so
            # a later step's wait runs from the end of the step before it.
            first_in_call = tf.equal(tf.math.floormod(state[3], per_call), 0.0)
            ready = tf.where(first_in_call, entry, state[2])
            wait = tf.maximum(start - ready, 0.0)
            timer.assign(tf.stack([state[0] + wait, state[1] + (end - start), end,
                                   state[3] + 1.0]))
            return logs

        model.train_step = timed_train_step

    def _reset_epoch(self):
        self._epoch_start = self._cpu_start = 0.0
        self._train_end: Optional[float] = None
        self._cpu_end: Optional[float] = None
        self._batches = 0
        self._call_start = 0.0
        self._traces_at_call = 0
        self._call_seconds = 0.0  # time in untraced train-function calls
        self._wait_seconds = 0.0  # in-graph input wait of those calls
        self._compute_seconds = 0.0  # in-graph compute of those calls
        self._last_timer = (0.0, 0.0)
        # Whole cycles of untraced calls (end of one call to the end of the next: Keras'
        # loop, every callback, the dispatch, the steps): what more steps per call amortise.
        self._last_call_end: Optional[float] = None
        self._cycles = {"seconds": 0.0, "calls": 0, "wait": 0.0, "compute": 0.0}

    def _read_timer(self) -> tuple:
        if self._compute is None:
            return 0.0, 0.0
        wait, compute, _, _ = self._compute.numpy()
        return float(wait), float(compute)

    def on_epoch_begin(self, epoch, logs=None):
        self._reset_epoch()
        if self._compute is not None:
            # An epoch starts a new call into the train function: restart the count of
            # steps per call too (a finite dataset may have ended the last call early).
            self._compute.assign(tf.zeros([4], tf.float64))
        self._last_timer = self._read_timer()
        self._epoch_start = time.perf_counter()
        self._cpu_start = time.process_time()

    def on_train_batch_begin(self, batch, logs=None):
        self._traces_at_call = self._traces
        self._call_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        seconds = now - self._call_start
        self._batches = max(self._batches, batch + 1)
        if self._compute is None:
            return
        timer = self._read_timer()
        wait, compute = timer[0] - self._last_timer[0], timer[1] - self._last_timer[1]
        if self._traces != self._traces_at_call:
            # The first call waits for input the cache has not filled yet (a whole-split
            # shuffle: every example): the in-graph timer tells that wait from the trace.
            self.trace_seconds += max(seconds - wait - compute, 0.0)
        else:
            self._call_seconds += seconds
            self._wait_seconds += wait
            self._compute_seconds += compute
            if self._last_call_end is not None:
                cycles = self._cycles
                cycles["seconds"] += now - self._last_call_end
                cycles["calls"] += 1
                cycles["wait"] += wait
                cycles["compute"] += compute
        self._last_timer = timer
        self._last_call_end = now

    def on_test_begin(self, logs=None):
        if self._train_end is None:
            self._train_end = time.perf_counter()
            self._cpu_end = time.process_time()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        # An unmeasured figure is left out: TensorBoard cannot write a None scalar.
        logs.update({k: v for k, v in self.epoch_figures().items() if v is not None})

    def epoch_figures(self) -> dict:
        """The current epoch's figures (what `on_epoch_end` adds to the logs)."""
        end = self._train_end or time.perf_counter()
        cpu_end = self._cpu_end if self._cpu_end is not None else time.process_time()
        seconds = max(end - self._epoch_start, 1e-9)
        cpu_seconds = cpu_end - self._cpu_start
        figures = {
            "steps_per_sec": self._batches / seconds,
            "step_time_ms": 1000.0 * seconds / max(self._batches, 1),
            "input_wait_fraction": self.input_wait_fraction(),
            "cpu_cores_used": cpu_seconds / seconds,
            "cpu_utilisation": cpu_seconds / seconds / self._cores,
            # ru_maxrss is in KiB on Linux: the process's peak resident memory so far.
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }
        device = peak_device_memory_mb()
        if device is not None:
            figures["peak_device_mb"] = device
        return figures

    def input_wait_fraction(self) -> Optional[float]:
        """This epoch's input wait over the time in the train function (None: unmeasured)."""
        if self._compute is None or self._call_seconds <= 0:
            return None
        return min(max(self._wait_seconds / self._call_seconds, 0.0), 1.0)

    def framework_overhead_fraction(self) -> Optional[float]:
        """This epoch's time in the train function that is neither input wait nor the step
        itself (function dispatch, Keras' loop, metric reads): high on tiny models, where
        `steps_per_execution` pays (None: unmeasured)."""
        if self._compute is None or self._call_seconds <= 0:
            return None
        rest = self._call_seconds - self._wait_seconds - self._compute_seconds
        return min(max(rest / self._call_seconds, 0.0), 1.0)


    def per_call_cost(self, *, min_calls: int = 3) -> Optional[dict]:
        """This epoch's cost of a call beyond its steps, and a step's compute, in seconds.

        ``{"overhead_seconds", "step_seconds", "calls"}`` averaged over the untraced calls
        after the first of the epoch (whole cycles: the fit loop and every callback count);
        None when unmeasured or fewer than `min_calls` calls were seen.
        """
        cycles = self._cycles
        if self._compute is None or cycles["calls"] < min_calls:
            return None
        steps = cycles["calls"] * max(self.steps_per_execution, 1)
        rest = cycles["seconds"] - cycles["wait"] - cycles["compute"]
        return {"overhead_seconds": max(rest, 0.0) / cycles["calls"],
                "step_seconds": cycles["compute"] / steps, "calls": cycles["calls"]}


def speed_line(figures: dict, *, epoch: int, global_batch_size: int, cores: int) -> str:
    """One short line of an epoch's throughput figures, for people (the logs keep them all).

    Args:
        figures: The epoch's `THROUGHPUT_KEYS` entries (an unmeasured one absent).
        epoch: The epoch, counted from 1.
        global_batch_size: Examples per optimizer step.
        cores: The cores this process may use.

    Returns:
        E.g. ``epoch 1: 3,942 examples/s, 16.2 ms/step, input wait 3%, 1.9 of 2 cores``.
    """
    parts = []
    if figures.get("steps_per_sec") is not None:
        parts.append(f"{figures['steps_per_sec'] * global_batch_size:,.0f} examples/s")
    if figures.get("step_time_ms") is not None:
        parts.append(f"{figures['step_time_ms']:.1f} ms/step")
    if figures.get("input_wait_fraction") is not None:
        parts.append(f"input wait {100 * figures['input_wait_fraction']:.0f}%")
    if figures.get("cpu_cores_used") is not None:
        parts.append(f"{figures['cpu_cores_used']:.1f} of {cores} cores")
    return f"epoch {epoch}: {', '.join(parts)}"


class SpeedLine(keras.callbacks.Callback):
    """Keeps Keras' epoch line Keras' own: takes `THROUGHPUT_KEYS` out of the epoch's logs
    before Keras' progress bar prints them, and prints them as one short line of its own
    (`speed_line`) just after Keras' epoch line.

    Last in the callback list: the metrics logger, TensorBoard and the caller's callbacks
    before it see every figure; only `fit`'s History and progress bar (Keras appends them
    after every given callback) do not. The line waits for the next epoch's start or the
    end of training, where Keras' own line of the epoch has been printed.
    """

    def __init__(self, *, show: bool, global_batch_size: int):
        super().__init__()
        self.show = show
        self.global_batch_size = global_batch_size
        self._cores = available_cores()
        self._pending: Optional[str] = None

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        figures = {key: logs.pop(key) for key in THROUGHPUT_KEYS if key in logs}
        if self.show and figures:
            self._pending = speed_line(figures, epoch=epoch + 1, cores=self._cores,
                                       global_batch_size=self.global_batch_size)

    def on_epoch_begin(self, epoch, logs=None):
        self._print()

    def on_train_end(self, logs=None):
        self._print()

    def _print(self):
        if self._pending is not None:
            say(self._pending)
            self._pending = None


def peak_device_memory_mb() -> Optional[float]:
    """Peak memory of the accelerators TensorFlow reports it for (GPUs), summed; else None."""

    total, seen = 0.0, False
    for device in tf.config.list_logical_devices("GPU"):
        try:
            info = tf.config.experimental.get_memory_info(device.name)
        except (ValueError, tf.errors.OpError):
            continue
        total += info.get("peak", 0) / 2**20
        seen = True
    return total if seen else None


class ProfileSteps(keras.callbacks.Callback):
    """Records a TensorBoard profiler trace of optimizer steps START..END (from 1, inclusive).

    The trace goes to `logdir/plugins/profile/<time>/`, where TensorBoard's Profile tab
    (the `tensorboard-plugin-profile` package, `pip install 'tfaccel[profile]'`) finds it.
    With `steps_per_execution` k, Keras runs k steps per call, so the trace covers whole
    calls: from the one holding START to the one holding END.
    """

    def __init__(self, start: int, end: int, *, logdir, steps_per_execution: int = 1,
                 first_step: int = 0):
        super().__init__()
        self.start, self.end = start, end
        self.logdir = str(logdir)
        self.per_call = max(steps_per_execution, 1)
        self._done = first_step  # optimizer steps finished before this process's first
        self.active = False
        self.recorded = False

    def on_train_batch_begin(self, batch, logs=None):
        first, last = self._done + 1, self._done + self.per_call
        if not self.active and not self.recorded and first <= self.end and last >= self.start:
            tf.profiler.experimental.start(self.logdir)
            self.active = True

    def on_train_batch_end(self, batch, logs=None):
        self._done += self.per_call
        if self.active and self._done >= self.end:
            self._stop()

    def on_train_end(self, logs=None):
        if self.active:  # training ended (or stopped early) inside the range
            self._stop()

    def _stop(self):
        tf.profiler.experimental.stop()
        self.active = False
        self.recorded = True

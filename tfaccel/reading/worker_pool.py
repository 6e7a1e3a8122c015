"""Worker pool for Python sources: processes (shared memory) or threads; no TensorFlow here."""

from __future__ import annotations

import atexit
import collections
import gc
import inspect
import itertools
import multiprocessing
import os
import queue
import random
import signal
import sys
import threading
import time
import traceback
import weakref
from multiprocessing import resource_tracker, shared_memory
from typing import Callable, Iterator, List, Optional

import numpy as np

_POLL_SECONDS = 0.1
# Chunks at least this big travel through a shared-memory segment (one copy in, one copy
# out); smaller ones are pickled through the result pipe, where a segment's set-up costs more
# than it saves. Measured in benchmarks/bench_data_python.py.
SHM_MIN_BYTES = 1 << 16


class WorkerError(RuntimeError):
    """A worker failed; the message carries the worker's own traceback text."""


class PoolClosed(WorkerError):
    """The pool was closed under a waiting reader: the epoch is incomplete."""


def flatten(example) -> list:
    """Flattens tuples/lists/dicts (dict keys sorted, like ``tf.nest``) into a list of leaves."""
    if isinstance(example, dict):
        return [leaf for key in sorted(example) for leaf in flatten(example[key])]
    if isinstance(example, (tuple, list)):
        return [leaf for item in example for leaf in flatten(item)]
    return [example]


def _stack(examples: list) -> List[np.ndarray]:
    flat = [flatten(e) for e in examples]
    return [np.stack([np.asarray(row[i]) for row in flat]) for i in range(len(flat[0]))]


def _pack(arrays: List[np.ndarray], use_shm: bool):
    total = sum(a.nbytes for a in arrays)
    if not use_shm or total < SHM_MIN_BYTES:
        return ("pickle", arrays)
    shm = shared_memory.SharedMemory(create=True, size=max(total, 1))
    layout, offset = [], 0
    for a in arrays:
        np.ndarray(a.shape, a.dtype, buffer=shm.buf, offset=offset)[...] = a
        layout.append((a.dtype.str, a.shape, offset))
        offset += a.nbytes
    name = shm.name
    shm.close()  # the parent unlinks it after copying out
    return ("shm", name, layout)


def unpack(payload) -> List[np.ndarray]:
    """Turns a worker's payload back into arrays (copying out of, then freeing, shared memory)."""
    if payload[0] == "pickle":
        return payload[1]
    _, name, layout = payload
    shm = shared_memory.SharedMemory(name=name)
    try:
        return [np.ndarray(shape, np.dtype(dtype), buffer=shm.buf, offset=offset).copy()
                for dtype, shape, offset in layout]
    finally:
        shm.close()
        shm.unlink()


def _discard(payload):
    if payload and payload[0] == "shm":
        try:
            unpack(payload)
        except FileNotFoundError:
            pass


def _discard_result(item) -> None:
    """Frees the shared memory of a result never taken (only a chunk holds any)."""
    if item[0] == "chunk":
        _discard(item[4])


def _worker_loop(worker_id, num_workers, source, transform, random_access, tasks, results,
                 parent_pid, use_shm, shard, stop, rng_state=None):
    """Body of one worker: serves every epoch of its pool until told to stop.

    A task is ``(epoch, chunk_id, arg)``: the indices of a random-access chunk, or, for a
    generator source, a credit for `arg` more examples of this worker's share of that epoch
    (the epoch's first task starts its own ``source(shard, num_shards)`` iterator). A
    generator worker ends its share of an epoch with ``("done", epoch, id, key, count)``,
    `count` being the examples it produced in that epoch; the parent checks it, so that only
    a worker that ran out of examples can end an epoch. ``(epoch, None, None)`` forgets an
    epoch the parent has closed. An exception in the source or transform is reported with
    its traceback and fails only that epoch; the worker itself never exits on its own, so
    any exit while the pool is open (a signal, a crash, ``os._exit``) is an error.
    """
    if parent_pid is not None:
        # Ctrl-C reaches the whole process group; the parent decides, workers just stop
        # when told or when the parent is gone. The parent started us with SIGINT blocked,
        # so a Ctrl-C that arrived before this line is discarded here instead of raising
        # KeyboardInterrupt in a half-started worker.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        # A forked worker holds a copy of the parent's objects, TensorFlow's among them,
        # whose locks may have been held by threads that do not exist here. The parent
        # forked with the collector off; freezing keeps it from ever running their
        # finalisers here. Only this worker's own objects are collected.
        gc.freeze()
        gc.enable()
        # Forked workers start as copies of one RNG state: without this, every worker
        # would draw the same "random" numbers (e.g. augmentation) as the others.
        np.random.seed(rng_state)
        random.seed(int.from_bytes(rng_state.tobytes(), "little"))
    iterators, produced = {}, {}  # per open epoch (generator sources)
    ended = set()  # epochs whose share this worker has finished (until forgotten)
    try:
        while True:
            try:
                task = tasks.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                if parent_pid is not None and os.getppid() != parent_pid:
                    return  # orphaned: the parent died without telling us
                continue
            if task is None or stop.is_set():
                return
            epoch, chunk_id, arg = task
            if chunk_id is None:
                iterators.pop(epoch, None)
                produced.pop(epoch, None)
                ended.discard(epoch)
                continue
            if epoch in ended:
                continue  # a credit still queued when this worker's share ran out
            try:
                if random_access:
                    items = (source[int(i)] for i in arg)
                else:
                    if epoch not in iterators:
                        # With several input pipelines, pipeline p's worker w is shard
                        # p * N + w.
                        iterators[epoch] = iter(source(shard[0] * num_workers + worker_id,
                                                       shard[1] * num_workers))
                        produced[epoch] = 0
                    items = itertools.islice(iterators[epoch], arg)
                examples = []
                for example in items:
                    if stop.is_set():
                        return  # the parent is closing: drop the chunk, exit at once
                    examples.append(example if transform is None else transform(example))
                payload = _pack(_stack(examples), use_shm) if examples else None
            except Exception:  # the epoch fails with this text in the parent
                results.put(("error", epoch, worker_id, chunk_id, traceback.format_exc()))
                if not random_access:
                    iterators.pop(epoch, None)  # a broken iterator: this epoch is over
                    ended.add(epoch)
                continue
            if not examples:
                results.put(("done", epoch, worker_id, chunk_id, produced.get(epoch, 0)))
                if not random_access:
                    del iterators[epoch]
                    ended.add(epoch)
                continue
            if not random_access:
                produced[epoch] += len(examples)
            results.put(("chunk", epoch, worker_id, chunk_id, payload))
    except BaseException:  # every failure must reach the caller as text
        # Outside any one task (SystemExit from a source, a failing put): the worker is
        # going down, which fails every epoch of the pool.
        results.put(("error", None, worker_id, None, traceback.format_exc()))


_LIVE_POOLS: "weakref.WeakSet[Pool]" = weakref.WeakSet()
# The epoch generators handed to tf.data (see `track_epoch`).
_EPOCHS: "weakref.WeakSet" = weakref.WeakSet()
# Set by the atexit hook: the main thread is done, so no consumer is left to be misled.
_interpreter_exiting = False


def track_epoch(generator):
    """Registers the generator of one epoch that tf.data runs; returns it."""
    _EPOCHS.add(generator)
    return generator


@atexit.register
def _close_all(timeout: float = 10.0, idle: float = 1.0) -> None:
    """At interpreter exit: closes every pool, then lets tf.data finish with the epochs.

    tf.data runs an epoch generator from its own threads, and every call into it (the next
    chunk, or the finaliser that drops it) needs the GIL. A thread that asks for the GIL
    once the interpreter has started finalising (right after the atexit hooks) is ended
    on the spot by Python, and whoever waits for it, TensorFlow's iterator destructor on
    the main thread, waits forever: the hang (or, unwinding that thread, the crash) of a
    Ctrl-C during an epoch. So, while Python still serves every thread:

    1. the pools close, so a generator that runs now, or that tf.data calls again, ends
       (quietly, see `run_epoch`) and tf.data finalises it;
    2. the record of the exception that ended the program (`sys.last_value` and its
       traceback) is dropped, as Python itself would do a moment later while finalising:
       the iterators its frames hold (a Ctrl-C's `for` loop, `model.fit`) are destroyed
       now, and their destructors wait for tf.data's threads while those can still run;
    3. this waits, GIL released, until no thread runs a TensorFlow py_func and every
       epoch generator is gone, or those left have not been called for `idle` seconds
       (an iterator whose prefetch buffer is full and that nobody reads asks for nothing
       more; the finaliser its destructor runs while Python finalises is refused by
       TensorFlow's own check, not waited for); at most `timeout` seconds.
    """
    global _interpreter_exiting
    _interpreter_exiting = True
    if not _LIVE_POOLS:
        return  # no pool, so no iterator of one either (each holds its pool's dataset)
    for pool in list(_LIVE_POOLS):
        pool.close()
    if _EPOCHS:
        for name in ("last_exc", "last_type", "last_value", "last_traceback"):
            if getattr(sys, name, None) is not None:
                setattr(sys, name, None)
        if _EPOCHS:
            gc.collect()  # frames of the dropped traceback that sit in reference cycles
    _wait_for_epochs(timeout=timeout, idle=idle)


def _wait_for_epochs(*, timeout: float, idle: float) -> None:
    """Waits until no epoch generator is left, or those left were idle for `idle` s."""
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    left = len(_EPOCHS)
    while time.monotonic() < deadline:
        # Only a generator suspended at a yield can be idle; one running, not started yet
        # (tf.data calls it next) or finished (tf.data drops it next) is about to be
        # called or dropped. tf.data's finaliser dropping the last reference is what ends
        # a generator, so no reference is kept across the sleep; and that finaliser is
        # itself Python, still running after the generator is gone, hence the frames.
        busy = (_tensorflow_runs_python()
                or any(inspect.getgeneratorstate(g) != inspect.GEN_SUSPENDED
                       for g in list(_EPOCHS)))
        now = time.monotonic()
        if busy or len(_EPOCHS) != left:
            quiet_since, left = now, len(_EPOCHS)
        elif not left or now - quiet_since >= idle:
            return
        time.sleep(0.01)


# Where TensorFlow enters Python to run a py_func (a generator's next element, its
# finaliser, a numpy_function): the outermost frame of such a thread.
_PY_FUNC_ENTRY = os.path.join("tensorflow", "python", "ops", "script_ops.py")


def _tensorflow_runs_python() -> bool:
    """Whether another thread is inside a TensorFlow py_func right now."""
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        while frame.f_back is not None:
            frame = frame.f_back
        if frame.f_code.co_filename.endswith(_PY_FUNC_ENTRY):
            return True
    return False


def close_with(owner, pool: "Pool") -> None:
    """Closes `pool` when `owner` is garbage collected (at exit `_close_all` does it)."""
    finalizer = weakref.finalize(owner, pool.close)
    # Not at exit: `_close_all` closes every pool then, after marking the interpreter as
    # exiting, which readers still inside an epoch need to see (see `run_epoch`).
    finalizer.atexit = False


class Pool:
    """N workers that turn tasks into chunks of stacked examples, for any number of epochs.

    Start it where the dataset is built (the caller's thread, before tf.data runs anything),
    then run each epoch with `run_epoch`; the same workers serve every epoch. Results are
    tagged with their epoch, so an epoch abandoned half-way (an iterator dropped early) or
    two iterators open at once never mix. `close()` it, or let it be collected: it is also
    closed by `__del__` and at interpreter exit.
    """

    def __init__(self, *, source, transform: Optional[Callable], random_access: bool,
                 workers: int, mode: str, start_method: Optional[str] = None,
                 shard=(0, 1), seed=None):
        self.mode = mode
        self.workers = workers
        self.random_access = random_access
        self.closed = False
        if mode == "process":
            ctx = multiprocessing.get_context(resolve_start_method(start_method))
            # The resource tracker must exist before forking, so that segments created by a
            # worker and unlinked by the parent are tracked by one and the same tracker.
            resource_tracker.ensure_running()
            self.results = ctx.Queue()
            self.tasks = [ctx.Queue() for _ in range(workers)]
            self.stop = ctx.Event()
            # Each worker's seed for NumPy's and Python's global RNGs: drawn from `seed` (an
            # int or a sequence of ints; None: fresh entropy), one per worker.
            states = [s.generate_state(4)
                      for s in np.random.SeedSequence(seed).spawn(workers)]
            self.handles = [
                ctx.Process(target=_worker_loop, daemon=True, name=f"tfaccel-data-{i}",
                            args=(i, workers, source, transform, random_access,
                                  self.tasks[i], self.results, os.getpid(), True, shard,
                                  self.stop, states[i]))
                for i in range(workers)]
        else:
            self.results = queue.Queue()
            self.tasks = [queue.Queue() for _ in range(workers)]
            self.stop = threading.Event()
            self.handles = [
                threading.Thread(target=_worker_loop, daemon=True, name=f"tfaccel-data-{i}",
                                 args=(i, workers, source, transform, random_access,
                                       self.tasks[i], self.results, None, False, shard,
                                       self.stop))
                for i in range(workers)]
        # Threads (tf.data's, running the generator) currently waiting in get(): close()
        # lets them leave before returning, because at interpreter exit a thread that still
        # needs the GIL while Python finalises TensorFlow's iterators deadlocks the exit.
        self._getters = 0
        self._getters_lock = threading.Lock()
        # Open epochs and the results read for them but not yet taken. One thread at a
        # time reads the shared result queue and files each result under its epoch.
        self._epoch_ids = itertools.count()
        self._boxes = {}
        self._boxes_lock = threading.Lock()
        self._reader = threading.Lock()
        # Set once a worker is gone or failed outside a task: every epoch fails with it.
        self._fatal: Optional[str] = None
        _LIVE_POOLS.add(self)
        if mode == "process":
            # Children inherit the signal mask: a Ctrl-C between the fork and the worker's
            # SIG_IGN stays pending (then discarded) instead of killing the worker. The
            # process-wide signal still reaches this process's main thread.
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
            collecting = gc.isenabled()
            gc.disable()  # no collection between a fork and the child's gc.freeze()
            try:
                for h in self.handles:
                    h.start()
            finally:
                if collecting:
                    gc.enable()
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        else:
            for h in self.handles:
                h.start()

    @property
    def pids(self) -> List[int]:
        """Process ids of the workers (empty in thread mode)."""
        return [h.pid for h in self.handles if self.mode == "process"]

    def open_epoch(self) -> int:
        """Registers a new epoch; returns its id for `submit`, `get` and `close_epoch`."""
        if self.closed:
            raise PoolClosed("The data worker pool is closed; no epoch can start.")
        epoch = next(self._epoch_ids)
        with self._boxes_lock:
            self._boxes[epoch] = collections.deque()
        return epoch

    def close_epoch(self, epoch: int) -> None:
        """Forgets `epoch`: its unread results (and later ones) are discarded and freed."""
        with self._boxes_lock:
            box = self._boxes.pop(epoch, None)
        for item in box or ():
            _discard_result(item)
        if self.closed or self.random_access:
            return
        for q in self.tasks:  # generator workers drop that epoch's iterator
            try:
                q.put((epoch, None, None))
            except (ValueError, OSError):
                pass

    def submit(self, worker_id: int, epoch: int, chunk_id, arg) -> None:
        self.tasks[worker_id].put((epoch, chunk_id, arg))

    def get(self, epoch: int):
        """Next result of `epoch`: ``(kind, worker_id, chunk_id, payload)``; raises WorkerError."""
        with self._getters_lock:
            self._getters += 1
        try:
            return self._get(epoch)
        finally:
            with self._getters_lock:
                self._getters -= 1

    def _get(self, epoch: int):
        while True:
            item = self._take(epoch)
            if item is None:
                if not self._reader.acquire(timeout=_POLL_SECONDS):
                    continue
                try:
                    # Filed by another reader while we waited for the queue?
                    item = self._take(epoch)
                    if item is None:
                        self._read_one()
                        continue
                finally:
                    self._reader.release()
            kind, _, worker_id, chunk_id, payload = item
            if kind == "error":
                raise WorkerError(f"Worker {worker_id} ({self.mode}) raised an exception; its "
                                  f"traceback:\n{payload}")
            return kind, worker_id, chunk_id, payload

    def _take(self, epoch: int):
        """The oldest result filed for `epoch`, or None; raises if the pool cannot go on."""
        if self.closed:
            raise PoolClosed("The data worker pool was closed before the epoch was "
                             "complete; the epoch is not ended early.")
        with self._boxes_lock:
            box = self._boxes.get(epoch)
            if box:
                return box.popleft()
        if box is None:
            raise PoolClosed(f"Epoch {epoch} of the data worker pool is not open.")
        if self._fatal is not None:
            raise WorkerError(self._fatal)
        return None

    def _read_one(self) -> None:
        """Reads one result from the workers and files it under its epoch (reader lock held)."""
        # Workers seen gone BEFORE the read: everything they sent was in the pipe by then (a
        # process flushes its queue before it exits), so an empty read after this proves
        # they left with work unanswered. No worker may leave while the pool is open.
        gone = [i for i, h in enumerate(self.handles) if not h.is_alive()]
        try:
            item = self.results.get(timeout=_POLL_SECONDS)
        except (queue.Empty, OSError, ValueError, EOFError):
            if gone and not self.closed:
                self._fatal = self._gone_message(gone[0])
            return
        kind, epoch, worker_id, _, payload = item
        if kind == "error" and epoch is None:
            self._fatal = (f"Worker {worker_id} ({self.mode}) failed and stopped; its "
                           f"traceback:\n{payload}")
            return
        with self._boxes_lock:
            box = self._boxes.get(epoch)
            if box is not None:
                box.append(item)
                return
        _discard_result(item)  # a result of an epoch already closed

    def _gone_message(self, i: int) -> str:
        h = self.handles[i]
        if self.mode == "thread":
            how = "ended"
        else:
            code = h.exitcode
            if code is not None and code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                how = f"was killed by {name} (exit code {code})"
            elif code == 0:
                how = "exited (exit code 0)"
            else:
                how = (f"exited with code {code} without reporting a Python error (e.g. "
                       "killed by the OS for memory)")
        pid = f", pid {h.pid}" if self.mode == "process" else ""
        return (f"Worker {i} ({self.mode}{pid}) {how} before it had finished its share of "
                "the epoch; the epoch is incomplete, so it fails instead of ending early.")

    def close(self, timeout: float = 3.0) -> None:
        """Stops the workers and frees the shared memory of chunks nobody will read.

        Workers stop between two examples once `stop` is set. Meanwhile the result queue is
        drained: a worker whose last chunk still sits in its queue's pipe cannot exit until
        someone reads it. Only workers still alive after `timeout` are terminated (then
        killed); the queue is not read after that, since a process killed in mid-write leaves
        a partial message that would block the reader forever.
        """
        if self.closed:
            return
        self.closed = True
        _LIVE_POOLS.discard(self)
        self.stop.set()
        for q in self.tasks:
            try:
                q.put(None)
            except (ValueError, OSError):
                pass
        # Only started workers can be joined (a failed start leaves the rest unstarted).
        handles = [h for h in self.handles
                   if (h.ident if self.mode == "thread" else h.pid) is not None]
        if self.mode == "thread":
            for h in handles:
                h.join(timeout=timeout)
            self._wait_for_getters(timeout)
            self._discard_boxes()
            return
        deadline = time.monotonic() + timeout
        while any(h.is_alive() for h in handles) and time.monotonic() < deadline:
            self._drain(wait=0.05)
        self._drain(wait=0.0)  # whatever the exited workers flushed last
        for h in handles:
            if h.is_alive():
                h.terminate()
                h.join(timeout=1.0)
            if h.is_alive():
                h.kill()
                h.join(timeout=1.0)
            h.join(timeout=0)
        self._wait_for_getters(timeout)
        self._discard_boxes()
        for q in [*self.tasks, self.results]:
            q.close()
            q.cancel_join_thread()

    def _discard_boxes(self) -> None:
        with self._boxes_lock:
            boxes, self._boxes = list(self._boxes.values()), {}
        for box in boxes:
            for item in box:
                _discard_result(item)

    def _wait_for_getters(self, timeout: float) -> None:
        # get() notices `closed` within one poll interval and raises WorkerError.
        deadline = time.monotonic() + timeout
        while self._getters and time.monotonic() < deadline:
            time.sleep(0.01)

    def _drain(self, wait: float) -> None:
        """Reads and discards pending results (unlinking their shared memory)."""
        while True:
            try:
                item = self.results.get(timeout=wait) if wait else self.results.get_nowait()
            except (queue.Empty, ValueError, OSError, EOFError):
                return
            _discard_result(item)

    def __del__(self):
        self.close()


def resolve_start_method(start_method: Optional[str]) -> str:
    """The multiprocessing start method to use: `start_method`, or the default.

    The default is "fork" where available. Measured on 2 shared cores with TensorFlow
    loaded (benchmarks/bench_data_python.py --start-methods, whose main module imports
    TensorFlow): a pool of 2 workers is ready in 0.1-0.2 s with fork but 10-22 s with
    forkserver or spawn, because every such child imports the main module again, and
    with it TensorFlow (this module imports none: with a TensorFlow-free main module the
    same pool was ready in 0.45-1.0 s). Fork is kept safe for a parent whose
    TensorFlow threads run: the workers never call TensorFlow, start with the garbage
    collector frozen (no TensorFlow finaliser runs in a child) and with SIGINT blocked.
    "spawn"/"forkserver" remain available for sources that use libraries which are not
    fork-safe; their source and transform must then be picklable.
    """
    if start_method is None:
        return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return start_method


def _rows(arrays: List[np.ndarray]) -> int:
    return len(arrays[0]) if arrays else 0


def run_epoch(pool: Pool, **kwargs) -> Iterator[List[np.ndarray]]:
    """Yields the chunks of one epoch from `pool` (see `_run_epoch`).

    The epoch ends only when every worker finished its whole share; any other ending
    raises `WorkerError`. One exception: a pool closed by the atexit hook (the main thread
    has ended, e.g. on Ctrl-C, so nobody reads the data any more) ends quietly, because
    tf.data's threads can only stop without calling back into Python, which the
    finalising interpreter no longer allows, once the generator reports its end; an error
    makes them ask for the next element and the exit hangs.
    """
    try:
        epoch = pool.open_epoch()
    except PoolClosed:
        if not _interpreter_exiting:
            raise
        return
    try:
        yield from _run_epoch(pool, epoch, **kwargs)
    except PoolClosed:
        if not _interpreter_exiting:
            raise
    finally:
        # Also when tf.data drops the iterator half-way (GeneratorExit): the workers
        # discard what is still in flight for this epoch and stay for the next one.
        pool.close_epoch(epoch)


def _run_epoch(pool: Pool, epoch: int, *, random_access: bool, order=None, chunk_size: int,
               deterministic: bool, prefetch: int = 2) -> Iterator[List[np.ndarray]]:
    """Yields the chunks of one epoch from `pool`, in a fixed order when `deterministic`.

    The epoch ends only when every worker finished its whole share: each random-access
    chunk came back with as many examples as it asked for, and each generator worker sent
    its "done" with the count of examples it produced, equal to what arrived from it. Any
    other ending (a worker killed by a signal, crashed, or exited; the pool closed under
    the reader) raises `WorkerError`, never a silently short epoch.

    Each worker has at most `prefetch` chunks in flight, which bounds memory. In
    deterministic mode chunk c is done by worker c % N and chunks are yielded in order of c
    (random access) or round-robin over workers (generator sources); otherwise each result
    is yielded as soon as it arrives and the free worker gets the next chunk.
    """
    if random_access:
        yield from _random_access_epoch(pool, epoch, order=order, chunk_size=chunk_size,
                                        deterministic=deterministic, prefetch=prefetch)
    else:
        yield from _generator_epoch(pool, epoch, chunk_size=chunk_size,
                                    deterministic=deterministic, prefetch=prefetch)


def _random_access_epoch(pool: Pool, epoch: int, *, order, chunk_size: int,
                         deterministic: bool, prefetch: int) -> Iterator[List[np.ndarray]]:
    """Random-access sources: chunks of indices, each answered with exactly its examples."""
    n = pool.workers
    chunks = [order[i:i + chunk_size] for i in range(0, len(order), chunk_size)]
    next_chunk = 0
    per_worker = [[] for _ in range(n)]
    if deterministic:
        for c in range(len(chunks)):
            per_worker[c % n].append(c)
    in_flight = 0

    def dispatch(worker_id):
        nonlocal next_chunk, in_flight
        if deterministic:
            if per_worker[worker_id]:
                c = per_worker[worker_id].pop(0)
                pool.submit(worker_id, epoch, c, chunks[c])
                in_flight += 1
        elif next_chunk < len(chunks):
            pool.submit(worker_id, epoch, next_chunk, chunks[next_chunk])
            next_chunk += 1
            in_flight += 1

    for w in range(n):
        for _ in range(prefetch):
            dispatch(w)
    waiting, expected = {}, 0
    answered = set()
    while in_flight:
        kind, worker_id, chunk_id, payload = pool.get(epoch)
        in_flight -= 1
        dispatch(worker_id)
        arrays = unpack(payload) if kind == "chunk" else []
        if chunk_id in answered or _rows(arrays) != len(chunks[chunk_id]):
            raise WorkerError(
                f"Worker {worker_id} answered chunk {chunk_id} of {len(chunks[chunk_id])} "
                f"examples with {kind} {_rows(arrays)} examples"
                f"{' (a second time)' if chunk_id in answered else ''}.")
        answered.add(chunk_id)
        if not deterministic:
            yield arrays
            continue
        waiting[chunk_id] = arrays
        while expected in waiting:
            yield waiting.pop(expected)
            expected += 1
    if len(answered) != len(chunks):
        raise WorkerError(f"The epoch ended with {len(chunks) - len(answered)} of "
                          f"{len(chunks)} chunks unanswered.")


def _generator_epoch(pool: Pool, epoch: int, *, chunk_size: int, deterministic: bool,
                     prefetch: int) -> Iterator[List[np.ndarray]]:
    """Generator sources: each worker streams its own shard until it reports its end."""
    n = pool.workers
    # Generator sources: worker w runs its own shard source(w, n); tasks are credits, and
    # each chunk is keyed (worker, k) for its k-th chunk.
    counters = [itertools.count() for _ in range(n)]
    for w in range(n):
        for _ in range(prefetch):
            pool.submit(w, epoch, (w, next(counters[w])), chunk_size)
    running = set(range(n))  # workers that have not reported the end of their stream
    finished = set()  # workers whose end marker was reached in the deterministic order
    received = [0] * n  # examples that arrived from each worker
    waiting, turn, current = {}, [0] * n, 0
    while len(finished) < n:
        if not deterministic and not running:
            return
        kind, worker_id, chunk_id, payload = pool.get(epoch)
        if kind == "done":
            if worker_id not in running or payload != received[worker_id]:
                raise WorkerError(
                    f"Worker {worker_id} reported the end of its share after {payload} "
                    f"examples, but {received[worker_id]} arrived from it"
                    f"{' (a second end)' if worker_id not in running else ''}.")
            running.discard(worker_id)
            waiting[chunk_id] = None
        else:
            pool.submit(worker_id, epoch, (worker_id, next(counters[worker_id])),
                        chunk_size)
            arrays = unpack(payload)
            received[worker_id] += _rows(arrays)
            if not deterministic:
                yield arrays
                continue
            waiting[chunk_id] = arrays
        if not deterministic:
            continue
        # Round-robin over the workers that have not finished: each worker's next chunk.
        while len(finished) < n:
            while current in finished:
                current = (current + 1) % n
            key = (current, turn[current])
            if key not in waiting:
                break
            arrays = waiting.pop(key)
            turn[current] += 1
            if arrays is None:
                finished.add(current)
            else:
                yield arrays
            current = (current + 1) % n

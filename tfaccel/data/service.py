"""The tf.data service: send a pipeline to it, and start its dispatcher and workers."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import signal
import sys
import threading
from typing import Optional

import tensorflow as tf

from tfaccel.config.recipe import PROCESSING_MODES, parse_dispatcher_address
from tfaccel.errors import TfaccelError, UserInputError
from tfaccel.messages import say

_service = tf.data.experimental.service
COMPRESSIONS = ("auto", "snappy", None)


@dataclasses.dataclass(frozen=True)
class ServiceTarget:
    """Where and how `optimize` sends a pipeline: a dispatcher, a processing mode, a job.

    Attributes:
        dispatcher: ``grpc://HOST:PORT`` or ``HOST:PORT`` of a running dispatcher.
        processing_mode: ``"distributed_epoch"`` (the dispatcher splits the pipeline's
            source among the workers: every element once per pass) or
            ``"parallel_epochs"`` (every worker runs the whole pipeline).
        job_name: Consumers that give the same name share one job; None: a job of one's
            own for each iteration.
        compression: How batches cross the wire: ``"snappy"`` (each batch compressed on
            the worker and decompressed here: TensorFlow's own default), ``None``, or
            ``"auto"``: none when the dispatcher is on this machine (a loopback address),
            snappy otherwise. On one machine compressing only costs CPU that the trainer and
            the workers share: measured in benchmarks/bench_data_service.py.
    """

    dispatcher: str
    processing_mode: str = "distributed_epoch"
    job_name: Optional[str] = None
    compression: Optional[str] = "auto"

    def __post_init__(self):
        object.__setattr__(self, "dispatcher", parse_dispatcher_address(self.dispatcher))
        if self.processing_mode not in PROCESSING_MODES:
            raise UserInputError(f"processing_mode must be one of {list(PROCESSING_MODES)}, "
                                 f"got {self.processing_mode!r}.")
        if self.job_name is not None and (not isinstance(self.job_name, str)
                                          or not self.job_name):
            raise UserInputError(f"job_name must be a non-empty string or None, got "
                                 f"{self.job_name!r}.")
        if self.compression not in COMPRESSIONS:
            raise UserInputError(f"compression must be one of {list(COMPRESSIONS)}, got "
                                 f"{self.compression!r}.")

    @classmethod
    def from_config(cls, config) -> Optional["ServiceTarget"]:
        """The target a recipe's ``data.service`` section names, or None when it is off."""
        if config is None or not config.dispatcher:
            return None
        compression = getattr(config, "compression", "auto")
        return cls(config.dispatcher, processing_mode=config.processing_mode,
                   job_name=config.job_name or None,
                   compression=None if compression == "none" else compression)

    @property
    def salts_per_worker(self) -> bool:
        """Whether every worker must draw its own seeds (parallel_epochs).

        In parallel_epochs every worker runs the same pipeline graph; with the recipe's fixed
        seeds they would all produce the same batches, and the trainer would see each batch
        once per worker.
        """
        return self.processing_mode == "parallel_epochs"

    @property
    def wire_compression(self) -> Optional[str]:
        """TensorFlow's `compression` argument: "SNAPPY" or None (`auto` resolved)."""
        compression = self.compression
        if compression == "auto":
            host = self.dispatcher.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")
            compression = None if _is_loopback(host) else "snappy"
        return "SNAPPY" if compression == "snappy" else None


def _is_loopback(host: str) -> bool:
    """Whether `host` names this machine by a loopback name or address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost
        return False


def distribute(dataset: tf.data.Dataset, target: ServiceTarget) -> tf.data.Dataset:
    """Runs `dataset` on the service's workers; the result reads their output here.

    Args:
        dataset: The pipeline to run remotely. Everything in it (files it reads, its maps)
            runs on the workers, so paths must be valid there.
        target: The `ServiceTarget`.

    Returns:
        A dataset whose elements come from the service's workers in the order they finish
        them (not a fixed order).
    """
    return dataset.apply(_service.distribute(
        processing_mode=target.processing_mode, service=target.dispatcher,
        job_name=target.job_name, compression=target.wire_compression))


def worker_salt() -> tf.Tensor:
    """A 62-bit int64 drawn when the op first runs: different on every service worker.

    Both op seeds 0 make TensorFlow's kernel seed itself from a random source at run time;
    the raw op bypasses the graph-level seed that `tf.random.set_seed` would otherwise fix
    (the same on every worker, which is exactly what must not happen here).
    """
    return tf.raw_ops.RandomUniformInt(shape=tf.constant([], tf.int32),
                                       minval=tf.constant(0, tf.int64),
                                       maxval=tf.constant(2**62, tf.int64), seed=0, seed2=0)


def start_dispatcher(*, port: int = 0, work_dir: Optional[str] = None):
    """Starts a tf.data service dispatcher in this process.

    It listens on every network interface without authentication (TensorFlow takes no bind
    address; see `tfaccel.open_ports`), and its workers run whatever pipeline a client
    sends: only inside a trusted network or behind a firewall.

    Args:
        port: Port to listen on; 0 picks a free one.
        work_dir: A folder where the dispatcher journals its state; with it, a restarted
            dispatcher recovers its jobs (TensorFlow's fault-tolerant mode).

    Returns:
        ``(server, address)``: TensorFlow's `DispatchServer` and its ``grpc://HOST:PORT``.
    """
    config = _service.DispatcherConfig(port=int(port), work_dir=work_dir,
                                       fault_tolerant_mode=bool(work_dir))
    server = _start(_service.DispatchServer, config, what="dispatcher", port=port)
    return server, server.target


def start_worker(dispatcher: str, *, port: int = 0, host: str = "localhost"):
    """Starts a tf.data service worker in this process and registers it with `dispatcher`.

    It listens on every network interface without authentication (TensorFlow takes no bind
    address; `host` is only the name it is reached by) and runs whatever pipeline a client
    sends: only inside a trusted network or behind a firewall.

    Args:
        dispatcher: ``grpc://HOST:PORT`` or ``HOST:PORT`` of the dispatcher.
        port: Port to listen on; 0 picks a free one.
        host: The name or address under which trainers reach this worker (the dispatcher
            hands it to them): ``localhost`` only works when they run on this machine.

    Returns:
        ``(server, address)``: TensorFlow's `WorkerServer` and its ``HOST:PORT``.
    """
    address = parse_dispatcher_address(dispatcher).split("://", 1)[1]
    config = _service.WorkerConfig(dispatcher_address=address, port=int(port),
                                   worker_address=f"{host}:%port%")
    server = _start(_service.WorkerServer, config, what="worker", port=port)
    # The port is known only once the server runs (port 0); TF keeps it here.
    return server, f"{host}:{server._address.rsplit(':', 1)[1]}"


def _start(server_class, config, *, what: str, port: int):
    try:
        return server_class(config)
    except RuntimeError as error:  # gRPC's "Could not start gRPC server", nothing more
        raise TfaccelError(f"the tf.data service {what} could not start on port {port}: "
                           f"{error} (is the port already in use?).") from None


def serve_until_stopped(server, *, grace_seconds: float = 10.0) -> int:
    """Blocks until SIGINT or SIGTERM, then stops `server`; returns the signal number.

    `server.join()` waits inside TensorFlow where Python never sees a signal, so this waits
    on an event that the signal handlers set instead. Stopping waits for requests in flight;
    if that takes longer than `grace_seconds` (seen once, with a trainer still reading),
    the process exits at once rather than hang: its jobs are lost either way, and the
    dispatcher hands their work to the remaining workers.
    """
    stop = threading.Event()
    received = {}

    def handler(signum, _frame):
        received["signum"] = signum
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    # `_stop` is the servers' own shutdown (their destructor calls it too).
    stopper = threading.Thread(target=server._stop, daemon=True)
    stopper.start()
    stopper.join(grace_seconds)
    if stopper.is_alive():
        say(f"the server did not stop within {grace_seconds:g} s (requests in "
            "flight); exiting anyway.")
        sys.stderr.flush()
        # Not sys.exit: the server's destructor would wait on the same shutdown again.
        os._exit(0)
    return received["signum"]

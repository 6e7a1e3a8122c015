"""tf.data service on loopback: element counts per mode, a recipe trained through it, errors."""

import collections
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfaccel.config.recipe import parse_dispatcher_address, recipe_from_dict
from tfaccel.errors import RecipeError, UserInputError

DEFAULT_RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "default.yaml"
NUM_EXAMPLES = 40


_SERVE = ("from tfaccel.data import service as s\n"
          "import sys, time\n"
          "dispatcher, address = s.start_dispatcher()\n"
          "workers = [s.start_worker(address)[0] for _ in range(2)]\n"
          "print(address, flush=True)\n"
          "sys.stdin.read()\n")


@pytest.fixture(scope="module")
def service():
    """A dispatcher and 2 workers in a child process, on free loopback ports."""
    # In this process, stopping or dropping a WorkerServer after the tests waited 12-72 s
    # (task threads of finished jobs; the time varied from run to run); a child process is
    # killed at once and its sockets closed by the kernel.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen([sys.executable, "-c", _SERVE], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
    try:
        address = process.stdout.readline().strip()
        assert address.startswith("grpc://"), f"the service did not start: {address!r}"
        yield address
    finally:
        process.kill()
        process.wait(timeout=30)


def _pipeline(address, mode, *, stream=None, batch_size=4, seed=1):
    import tensorflow as tf

    from tfaccel.data import tail
    from tfaccel.data.service import ServiceTarget

    x = np.arange(NUM_EXAMPLES, dtype=np.int64)
    return tail.optimize(tf.data.Dataset.from_tensor_slices((x, x)), batch_size=batch_size,
                             shuffle_buffer=NUM_EXAMPLES, seed=seed, cache="memory",
                             stream=stream, service=ServiceTarget(address, processing_mode=mode))


def _read(dataset):
    counts, batches = collections.Counter(), []
    for x, y in dataset.as_numpy_iterator():
        assert (x == y).all()  # features and labels still travel together
        counts.update(x.tolist())
        batches.append(tuple(x.tolist()))
    return counts, batches


def test_distributed_epoch_sees_every_element_exactly_once(service):
    counts, _ = _read(_pipeline(service, "distributed_epoch"))
    assert sorted(counts) == list(range(NUM_EXAMPLES))
    assert set(counts.values()) == {1}


def test_distributed_epoch_stream_hands_each_pass_to_one_worker(service):
    # The recipe's stream of passes: the dispatcher splits it by pass, so over 3 passes every
    # example arrives exactly 3 times, in whole batches (each pass is made by one worker).
    from tfaccel.data import tail

    counts, batches = _read(_pipeline(service, "distributed_epoch",
                                      stream=tail.EpochStream(num_passes=3)))
    assert sorted(counts) == list(range(NUM_EXAMPLES))
    assert set(counts.values()) == {3}
    assert len(batches) == 3 * NUM_EXAMPLES // 4


def test_parallel_epochs_every_worker_makes_the_whole_epoch(service):
    counts, _ = _read(_pipeline(service, "parallel_epochs", seed=None))
    assert sorted(counts) == list(range(NUM_EXAMPLES))
    assert set(counts.values()) == {2}  # 2 workers, each the whole epoch


def test_parallel_epochs_stream_workers_make_different_passes(service):
    # Failing before the per-worker salt: with the recipe's fixed seed both workers made the
    # same batches, so the trainer read every batch twice.
    from tfaccel.data import tail

    counts, batches = _read(_pipeline(service, "parallel_epochs",
                                      stream=tail.EpochStream(num_passes=1)))
    assert set(counts.values()) == {2}
    assert len(batches) == 2 * NUM_EXAMPLES // 4
    assert len(set(batches)) == len(batches), "two workers made the same batches"


def _image_pipeline(augment, *, address=None, compression="auto"):
    import tensorflow as tf

    from tfaccel.data import tail
    from tfaccel.data.service import ServiceTarget

    images = (np.arange(NUM_EXAMPLES * 48) % 251).astype(np.uint8).reshape(NUM_EXAMPLES, 4, 4, 3)
    service = ServiceTarget(address, processing_mode="distributed_epoch",
                            compression=compression) if address else None
    return tail.optimize(tf.data.Dataset.from_tensor_slices((images, np.arange(NUM_EXAMPLES))),
                             batch_size=8, shuffle_buffer=NUM_EXAMPLES, seed=3,
                             augment=augment, stream=tail.EpochStream(num_passes=1),
                             service=service, deterministic=True)


@pytest.mark.parametrize("compression", ["snappy", None])
@pytest.mark.parametrize("augment, on_the_wire", [
    (["flip", "crop", "rotate90"], "uint8"),  # pixels only move: cast on arrival
    (["flip", "brightness"], "float32"),  # computed in float on the workers
])
def test_service_batches_are_the_in_process_batches_with_uint8_on_the_wire(
        service, augment, on_the_wire, compression):
    import tensorflow as tf

    from tfaccel.data.tail import stages

    served = _image_pipeline(augment, address=service, compression=compression)
    local = _image_pipeline(augment)
    assert served.element_spec[0].dtype == tf.float32 == local.element_spec[0].dtype
    # What the trainer reads from the service, before the arrival cast (if any).
    received = served
    while received.element_spec[0].dtype == tf.float32 and on_the_wire == "uint8":
        received = received._input_dataset
    assert received.element_spec[0].dtype.name == on_the_wire
    # One worker makes the pass (distributed_epoch): the same batches as in-process, in the
    # order the worker finished them. deterministic=True above: without it a parallel batch
    # may finish out of order and meet another batch's augmentation seed (a documented
    # freedom of deterministic=False, which CI once caught here).
    batch_bytes = [sorted((x.tobytes(), y.tobytes()) for x, y in d.as_numpy_iterator())
                   for d in (served, local)]
    assert len(batch_bytes[0]) == NUM_EXAMPLES // 8
    assert batch_bytes[0] == batch_bytes[1]
    plan_kwargs = dict(batch=8, drop=False, custom=None, augment_on="batch", seed=3,
                       parallel=None, det=None, image_dtype="float32", sequential=False)
    assert stages.uint8_on_the_wire(stages.Plan(names=tuple(augment), **plan_kwargs)) \
        is (on_the_wire == "uint8")


def test_a_short_recipe_trains_through_the_service_and_resumes(service, tmp_path,
                                                               shapes_data_dir, capsys):
    from tfaccel.training.run import runner

    result = runner.train(str(DEFAULT_RECIPE), [
        f"data.data_dir={shapes_data_dir}", f"data.service.dispatcher={service}",
        "data.shuffle_buffer=256", "training.epochs=1", "training.steps_per_epoch=6",
        "training.validation_steps=2", "training.global_batch_size=32",
        "runtime.precision=float32", "runtime.verbose=0"], run_dir=str(tmp_path / "run"))
    run = Path(result.run_dir)
    for name in ("recipe.yaml", "metrics.jsonl", "summary.json", "model.keras"):
        assert (run / name).is_file(), name
    assert (run / "checkpoints" / "epoch-001").is_dir()
    assert any((run / "tensorboard").rglob("events.out.tfevents.*"))
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs_completed"] == 1
    assert summary["status"] == "completed"
    assert np.isfinite(summary["final_metrics"]["loss"])
    assert "grpc://" in (run / "recipe.yaml").read_text()
    assert summary["dataset"]["data_service"] == {
        "dispatcher": service, "processing_mode": "distributed_epoch", "job_name": None}

    # Resume (here: extending the finished run) works through the service, and says that
    # the data position is approximate there.
    capsys.readouterr()
    extended = runner.train(resume=run, overrides=["training.epochs=2"])
    assert [e["epoch"] for e in extended.epochs] == [1, 2]
    assert extended.summary["status"] == "completed"
    assert "the data position only approximately" in capsys.readouterr().out


def test_a_named_job_is_joined_so_a_resumed_stream_gets_its_own_name(service):
    # TensorFlow's behaviour: a second pipeline under an existing job name joins the old job
    # and reads ITS elements (here range(100) continues instead of range(50) starting).
    import tensorflow as tf

    from tfaccel.config.recipe import DataConfig, ServiceConfig
    from tfaccel.data.from_recipe import _train_tail
    from tfaccel.data.tail import EpochStream

    def named(start, n):
        return tf.data.Dataset.range(start, start + n).apply(
            tf.data.experimental.service.distribute("distributed_epoch", service,
                                                    job_name="shared"))

    first = iter(named(1000, 100))
    assert 1000 <= int(next(first)) < 1100  # either worker may answer first
    # A pipeline of other elements under the same name reads the OLD job's elements.
    assert 1000 <= int(next(iter(named(5000, 50)))) < 1100
    del first
    config = DataConfig(service=ServiceConfig(dispatcher=service, job_name="j"))
    assert _train_tail(config, 1, stream=EpochStream()).service.job_name == "j"
    resumed = _train_tail(config, 1, stream=EpochStream(first_pass=2, skip_batches=5))
    assert resumed.service.job_name == "j-resume-pass2-batch5"


@pytest.mark.parametrize("address, expected", [
    ("localhost:5050", "grpc://localhost:5050"),
    ("grpc://10.0.0.5:5050", "grpc://10.0.0.5:5050"),
    ("[::1]:80", "grpc://[::1]:80"),
])
def test_dispatcher_addresses_are_normalised(address, expected):
    assert parse_dispatcher_address(address) == expected


@pytest.mark.parametrize("address, words", [
    ("http://host:5050", "protocol 'http'"),
    ("host", "is not HOST:PORT"),
    (":5050", "is not HOST:PORT"),
    ("host:port", "no valid port ('port')"),
    ("host:70000", "no valid port ('70000')"),
])
def test_bad_dispatcher_addresses_are_refused(address, words):
    with pytest.raises(RecipeError, match=re.escape(words)) as info:
        recipe_from_dict({"data": {"service": {"dispatcher": address}}})
    assert "data.service.dispatcher" in str(info.value) and repr(address) in str(info.value)


@pytest.mark.parametrize("raw, words", [
    ({"data": {"service": {"dispatcher": "h:1", "processing_mode": "epochs"}}},
     "data.service.processing_mode must be one of distributed_epoch, parallel_epochs"),
    ({"data": {"source": "python", "path": "m:f", "service": {"dispatcher": "h:1"}}},
     "tensorflow/tensorflow#50252"),
    ({"data": {"cache": "/tmp/c", "service": {"dispatcher": "h:1"}}},
     "data.cache '/tmp/c' (a file) cannot be used with a tf.data service"),
    ({"data": {"service": {"dispatcher": "h:1"}}, "runtime": {"deterministic": True}},
     "runtime.deterministic cannot hold with a tf.data service"),
    ({"data": {"service": {"dispatcher": "h:1"}}, "runtime": {"strategy": "multi_worker"}},
     "runtime.strategy multi_worker is not supported"),
    ({"data": {"service": {"job_name": "j"}}}, "data.service.job_name ('j') needs"),
])
def test_what_the_service_cannot_run_is_refused_before_training(raw, words):
    with pytest.raises(RecipeError, match=re.escape(words)):
        recipe_from_dict(raw)


def test_library_target_checks_its_arguments():
    import tensorflow as tf

    from tfaccel.data import optimize
    from tfaccel.data.service import ServiceTarget

    dataset = tf.data.Dataset.range(8)
    with pytest.raises(UserInputError, match="service must be a tfaccel.data.ServiceTarget"):
        optimize(dataset, batch_size=2, service="localhost:5050")
    with pytest.raises(UserInputError, match="would make every service worker produce the same"):
        optimize(dataset, batch_size=2, shuffle_buffer=8, seed=3,
                 service=ServiceTarget("h:1", processing_mode="parallel_epochs"))
    with pytest.raises(UserInputError, match="takes no service"):
        optimize(dataset, batch_size=2, sequential=True, service=ServiceTarget("h:1"))

    with pytest.raises(UserInputError, match="processing_mode must be one of"):
        ServiceTarget("h:1", processing_mode="dynamic")
    with pytest.raises(UserInputError, match="job_name must be a non-empty string"):
        ServiceTarget("h:1", job_name="")
    assert ServiceTarget("h:1").dispatcher == "grpc://h:1"
    with pytest.raises(UserInputError, match="compression must be one of .* got 'gzip'"):
        ServiceTarget("h:1", compression="gzip")


@pytest.mark.parametrize("dispatcher, compression, on_the_wire", [
    # auto: a dispatcher on this machine (loopback) gets uncompressed batches.
    ("localhost:5050", "auto", None),
    ("grpc://127.0.0.1:5050", "auto", None),
    ("[::1]:5050", "auto", None),
    ("10.0.0.5:5050", "auto", "SNAPPY"),
    ("data-host:5050", "auto", "SNAPPY"),
    ("localhost:5050", "snappy", "SNAPPY"),
    ("10.0.0.5:5050", None, None),
])
def test_wire_compression_is_off_on_loopback_unless_asked(dispatcher, compression,
                                                          on_the_wire):
    from tfaccel.data.service import ServiceTarget

    assert ServiceTarget(dispatcher, compression=compression).wire_compression == on_the_wire


def test_recipe_compression_key_reaches_the_target():
    from tfaccel.data.service import ServiceTarget

    def target(**service):
        raw = {"data": {"service": {"dispatcher": "10.0.0.5:5050", **service}}}
        return ServiceTarget.from_config(recipe_from_dict(raw).data.service)

    assert target().compression == "auto" and target().wire_compression == "SNAPPY"
    assert target(compression="none").wire_compression is None
    with pytest.raises(RecipeError, match="data.service.compression"):
        target(compression="zstd")


def test_a_python_source_run_is_refused_through_the_cli(tmp_path):
    from click.testing import CliRunner

    from tfaccel.cli.main import main

    result = CliRunner().invoke(main, [
        "validate", str(DEFAULT_RECIPE), "--set", "data.source=python",
        "--set", "data.path=mod:fn", "--set", "data.service.dispatcher=localhost:5050"])
    assert result.exit_code == 2
    assert "tensorflow/tensorflow#50252" in result.output
    assert "Traceback" not in result.output


def _wait_for_line(process, pattern, *, timeout=60):
    """The first stdout line matching `pattern` (the server's address), or fail."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not selector.select(timeout=1):
            continue
        line = process.stdout.readline()
        if not line:
            break
        match = re.search(pattern, line)
        if match:
            return match
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s")


@pytest.mark.slow
def test_cli_dispatcher_and_workers_serve_and_stop_cleanly(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    cli = [sys.executable, "-m", "tfaccel.cli", "data-service"]
    processes = []
    try:
        dispatcher = subprocess.Popen(cli + ["dispatcher", "--port", "0", "--work-dir",
                                             str(tmp_path / "journal")],
                                      stdout=subprocess.PIPE, text=True, env=env)
        processes.append(dispatcher)
        port = int(_wait_for_line(dispatcher, r"listening on grpc://\S+:(\d+)").group(1))
        # One worker: each process is a TensorFlow start-up (3-4 s); SIGTERM and SIGINT
        # are both still sent below (worker, then dispatcher).
        worker = subprocess.Popen(cli + ["worker", "--dispatcher", f"localhost:{port}"],
                                  stdout=subprocess.PIPE, text=True, env=env)
        processes.append(worker)
        _wait_for_line(worker, r"worker .* listening on")
        # This process reads one distributed epoch through them (a client of its own would
        # be one more TensorFlow start-up; the servers are the processes under test).
        import tensorflow as tf

        epoch = tf.data.Dataset.range(30).apply(tf.data.experimental.service.distribute(
            "distributed_epoch", f"grpc://localhost:{port}"))
        assert sorted(int(v) for v in epoch.as_numpy_iterator()) == list(range(30))
        for process, signum in zip(processes[::-1], (signal.SIGTERM, signal.SIGINT)):
            process.send_signal(signum)
            assert process.wait(timeout=30) == 0
            assert "stopped" in process.stdout.read()
        assert any((tmp_path / "journal").iterdir())  # the dispatcher's journal
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def test_cli_worker_refuses_a_bad_dispatcher_address():
    from click.testing import CliRunner

    from tfaccel.cli.main import main

    result = CliRunner().invoke(main, ["data-service", "worker", "--dispatcher", "nohost"])
    assert result.exit_code == 2
    assert "'nohost' is not HOST:PORT" in result.output


def test_cli_dispatcher_on_a_taken_port_fails_with_exit_1():
    import socket

    from click.testing import CliRunner

    from tfaccel.cli.main import main

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["data-service", "dispatcher", "--port", str(port)])
    assert result.exit_code == 1
    assert f"dispatcher could not start on port {port}" in result.output


def test_tfaccel_bench_measures_a_service_recipe_in_process_and_says_so(tmp_path):
    # No server runs here: the service must be left out (the sequential baseline cannot run
    # on it), and the table must say so rather than time something else silently.
    from tfaccel.config.recipe import DataConfig, ServiceConfig
    from tfaccel.tools import bench

    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((20, 4, 4, 3), np.uint8), y=np.arange(20) % 4)
    config = DataConfig(source="arrays", path=str(path),
                        service=ServiceConfig(dispatcher="localhost:1"))
    result = bench.bench_data_config(config, global_batch_size=4, num_batches=2, repeats=1,
                                     epochs=False)
    assert result["parallel"]["batches"] == 2
    assert result["service_left_out"] == "localhost:1"
    assert "tf.data service (localhost:1) was left out" in bench.format_table(result)


@pytest.mark.slow
@pytest.mark.heavy  # outside the CI budget: a subprocess that waits out the grace period
def test_a_server_whose_shutdown_hangs_still_exits_0_after_the_grace_period():
    # Seen once in the benchmark: a worker's shutdown waited on requests in flight for ever.
    code = ("import threading, time\n"
            "from tfaccel.data.service import serve_until_stopped\n"
            "class Stuck:\n"
            "    def _stop(self):\n"
            "        threading.Event().wait()\n"
            "print('serving', flush=True)\n"
            "serve_until_stopped(Stuck(), grace_seconds=1)\n"
            "print('not reached')\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    try:
        _wait_for_line(process, r"serving")
        import time

        time.sleep(1)  # the handlers are installed right after the line
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert "did not stop within 1 s" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_cli_dispatcher_and_worker_say_their_port_is_open_to_every_interface(monkeypatch):
    # TensorFlow binds 0.0.0.0 and takes no bind address, without authentication: the
    # commands must say so. Served "until a signal" that arrives at once.
    from click.testing import CliRunner

    from tfaccel.cli.main import main
    from tfaccel.data import service as service_lib

    def stop_at_once(server, **_):
        server._stop()
        return signal.SIGTERM

    monkeypatch.setattr(service_lib, "serve_until_stopped", stop_at_once)
    result = CliRunner().invoke(main, ["data-service", "dispatcher", "--port", "0"])
    assert result.exit_code == 0, result.output
    port = re.search(r"dispatcher listening on grpc://localhost:(\d+)", result.output).group(1)
    assert (f"tfaccel: the tf.data service dispatcher opens port {port} on every network "
            "interface (TensorFlow binds 0.0.0.0 and takes no other address), without "
            "authentication; its workers run any pipeline a client sends, file reads and "
            "writes included: keep it inside a trusted network or behind a firewall.\n"
            ) in result.output

    dispatcher, address = service_lib.start_dispatcher()
    try:
        result = CliRunner().invoke(main, ["data-service", "worker", "--dispatcher", address])
    finally:
        dispatcher._stop()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    port = re.search(r"worker localhost:(\d+) listening on port", lines[0]).group(1)
    assert lines[1].startswith(f"tfaccel: the tf.data service worker opens port {port} on "
                               "every network interface (TensorFlow binds 0.0.0.0")
    assert "without authentication; it runs any pipeline a client sends" in lines[1]
    assert lines[1].endswith("keep it inside a trusted network or behind a firewall.")

"""Shared test set-up: split the CPU into two logical devices before TensorFlow initialises."""

import contextlib
import os
import subprocess
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The suite's subprocesses import this checkout's tfaccel (not another one the package was
# installed from): it comes first on PYTHONPATH, set once here, so that they all share the
# test process's import-time environment and so its warm server (tests/warm_python.py).
_CHECKOUT = str(Path(__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join([_CHECKOUT] + [
    p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _CHECKOUT])

import pytest
import warm_python

NUM_LOGICAL_CPUS = 2

# tests/young_iterators.py: the tf.data iterators a test leaves in cycles are freed after it.
pytest_plugins = ["young_iterators"]


def pytest_configure(config):
    # Multi-replica code is tested on 2 logical CPU devices. The split must happen before
    # TensorFlow initialises its devices, which is once per process, so it is done here for
    # the whole session. Single-device code still runs on /CPU:0 unaffected.
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS
    )


# The fast tier for the edit-test loop, `python3 -m pytest -q -n 2 -m fast` (under 2 minutes on 2
# cores): the tests of every file that says `FAST_TIER = True` and are not marked slow, heavy
# or multiworker. A file joins by its measured time (its unmarked tests adding up to a few
# seconds) and leaves when it grows slow; the full suite (CI) runs everything anyway.
_NOT_FAST = ("slow", "heavy", "multiworker")


def pytest_collection_modifyitems(config, items):
    for item in items:
        in_fast_file = getattr(getattr(item, "module", None), "FAST_TIER", False)
        if in_fast_file and not any(item.get_closest_marker(m) for m in _NOT_FAST):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(autouse=True)
def _warm_subprocesses(request, monkeypatch):
    """A test's ``[sys.executable, ...]`` subprocesses are forks of a warm interpreter
    (tests/warm_python.py: TensorFlow imported once, ~5 s saved a process) unless the test
    is marked ``cold_python`` (it checks start-up itself: import lines, what a call loads)
    or TFACCEL_TESTS_COLD=1."""
    if not request.node.get_closest_marker("cold_python"):
        monkeypatch.setattr(subprocess, "Popen", warm_python.WarmPopen)


@pytest.fixture
def policy():
    """Sets a global Keras dtype policy for one test and restores the previous one (the
    models' tests: policy("mixed_bfloat16"))."""
    import keras

    previous = keras.mixed_precision.global_policy()
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy(previous)


@pytest.fixture
def logical_cpus():
    """Names of the logical CPU devices that multi-replica tests may use."""
    import tensorflow as tf

    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    assert len(devices) == NUM_LOGICAL_CPUS, devices
    return devices


@contextlib.contextmanager
def _made_once(tmp_path_factory, name: str):
    """``with _made_once(f, "x") as (folder, missing):`` fill `folder` when `missing`: one
    folder for the whole run, made by the first of pytest-xdist's workers to ask while the
    others wait (each would spend the same seconds of CPU making its own copy)."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder, done = root / name, root / f"{name}.done"
        yield folder, not done.exists()
        done.touch()


def _read_only(folder: Path) -> None:
    """Every file under `folder` read-only: a test that writes into a shared folder fails."""
    for path in folder.rglob("*"):
        if path.is_file():
            path.chmod(0o444)


@pytest.fixture(scope="session")
def shapes_data_dir(tmp_path_factory):
    """A TFDS data dir with the built-in `tfaccel_shapes` prepared once for the run
    (read-only: shared by the run's workers)."""
    from tfaccel import datasets

    with _made_once(tmp_path_factory, "tfds-shapes") as (data_dir, missing):
        if missing:
            datasets.prepare(data_dir=str(data_dir))
            _read_only(data_dir)
    return str(data_dir)


# How many of the built-in train images the shared image folder holds: what the shipped
# image-folder recipe's learning test trains on (its comment's 4,000 images).
SHAPES_IMAGES = 4000


@pytest.fixture(scope="session")
def shapes_image_folder(tmp_path_factory, shapes_data_dir):
    """The first 4,000 `tfaccel_shapes` train images, exported once for the run (shared).

    `export_image_folder` writes ``<class>/<index>.png``, the index counting from 0 over the
    split, so the first N files are exactly an export of ``train[:N]``. Read-only: a test that
    needs fewer images, or a folder of its own, takes `shapes_image_subset`.
    """
    from tfaccel.data import export_image_folder

    with _made_once(tmp_path_factory, "shapes-images") as (parent, missing):
        folder = parent / "images"
        if missing:
            summary = export_image_folder(folder, limit=SHAPES_IMAGES, data_dir=shapes_data_dir)
            assert summary["images"] == SHAPES_IMAGES
            _read_only(folder)
    return folder


@pytest.fixture
def shapes_image_subset(shapes_image_folder, tmp_path):
    """``subset(n)``: a folder of this test's own holding the shared export's first n images
    (hard links, read-only like the shared files): the same files an export of
    ``train[:n]`` writes."""
    import os

    def subset(n):
        assert 0 < n <= SHAPES_IMAGES
        folder = tmp_path / f"images-{n}"
        for class_dir in sorted(shapes_image_folder.iterdir()):
            (folder / class_dir.name).mkdir(parents=True)
            for image in class_dir.iterdir():
                if int(image.stem) < n:
                    os.link(image, folder / class_dir.name / image.name)
        return folder

    return subset


@pytest.fixture(autouse=True)
def _pinned_precision_measurement(monkeypatch, tmp_path_factory):
    """`runtime.precision: auto` on a CPU with bfloat16 instructions times a step in float32
    and bfloat16 (engine/precision.py). Tests never depend on this machine's timing or on
    a cache file in the home folder: the measurement is pinned (bfloat16 1.5x faster, the
    choice flags alone made before) and cached in a folder of the session; the tests of
    the choice itself replace it."""
    from tfaccel.engine import precision

    folder = tmp_path_factory.getbasetemp() / "cache"
    monkeypatch.setenv(precision.CACHE_ENV, str(folder))
    monkeypatch.setattr(precision, "measure_cpu_step", lambda **_: (3.0, 2.0))
    monkeypatch.setattr(precision, "_decided", {})
    if not (folder / precision.CACHE_FILE).exists():
        # The same figures for the `tfaccel` processes tests start (they inherit the
        # folder): they read them instead of timing their own step.
        precision._write_cache(str(folder / precision.CACHE_FILE),
                               {precision._cpu_key(): {"float32_ms": 3.0, "bfloat16_ms": 2.0}})


@pytest.fixture
def saved_listings(tmp_path, monkeypatch):
    """A listing cache folder of the test's own; every folder saved, files trusted at once."""
    from tfaccel.data import listing_cache

    where = tmp_path / "listings"
    monkeypatch.setenv(listing_cache.ENV, str(where))
    monkeypatch.setattr(listing_cache, "MIN_FILES", 0)
    monkeypatch.setattr(listing_cache, "RACY_NS", 0)
    return where

"""Shared test set-up: split the CPU into two logical devices before TensorFlow initialises."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

NUM_LOGICAL_CPUS = 2


def pytest_configure(config):
    # Multi-replica code is tested on 2 logical CPU devices. The split must happen before
    # TensorFlow initialises its devices, which is once per process, so it is done here for
    # the whole session. Single-device code still runs on /CPU:0 unaffected.
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS
    )


@pytest.fixture
def logical_cpus():
    """Names of the logical CPU devices that multi-replica tests may use."""
    import tensorflow as tf

    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    assert len(devices) == NUM_LOGICAL_CPUS, devices
    return devices


@pytest.fixture(scope="session")
def shapes_data_dir(tmp_path_factory):
    """A TFDS data dir with the built-in `tfaccel_shapes` prepared once for the session."""
    from tfaccel import datasets

    data_dir = tmp_path_factory.mktemp("tfds")
    datasets.prepare(data_dir=str(data_dir))
    return str(data_dir)

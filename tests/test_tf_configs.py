"""The TF_CONFIG of each process of a launch (tfaccel/cli/tf_configs.py): worker 0 the chief,
--hosts checked, SLURM's layout read through TensorFlow's resolver."""

import json
import os

import pytest
from launch_helpers import set_slurm_task

from tfaccel.cli import tf_configs
from tfaccel.config import cluster
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_tf_config_makes_worker_zero_the_chief(monkeypatch):
    hosts = ["a:1", "b:2"]
    for index in range(2):
        config = json.loads(tf_configs.tf_config(hosts, index))
        assert config == {"cluster": {"worker": hosts}, "task": {"type": "worker",
                                                                 "index": index}}
        monkeypatch.setenv("TF_CONFIG", tf_configs.tf_config(hosts, index))
        role = cluster.worker_role("auto")
        assert (role.index, role.count, role.chief, role.multi_worker) == (
            index, 2, index == 0, True)
    # Another strategy kind trains alone whatever TF_CONFIG says.
    assert cluster.worker_role("one_device") == cluster.WorkerRole()
    with pytest.raises(UserInputError, match="--index must be between 0 and 1 .* got 2"):
        tf_configs.tf_config(hosts, 2)


@pytest.mark.parametrize("text, message", [
    ("", "must list HOST:PORT"),
    ("a:1,b", "'b' is not HOST:PORT"),
    ("a:1,b:99999", "'b:99999' is not HOST:PORT"),
    ("a:1,a:1", "names a HOST:PORT twice"),
])
def test_bad_hosts_are_named(text, message):
    with pytest.raises(UserInputError, match=message):
        tf_configs.parse_hosts(text)


def test_parse_hosts():
    assert tf_configs.parse_hosts("node-1:2222, 10.0.0.2:2222") == ["node-1:2222", "10.0.0.2:2222"]


def test_slurm_layout_comes_from_tensorflows_resolver(monkeypatch):
    # Two nodes with two tasks each, as srun sets it; task 3 is the second on node2.
    set_slurm_task(monkeypatch, 3)
    assert tf_configs.in_slurm_job()
    hosts, index = tf_configs.slurm_cluster(port=2222)
    assert hosts == ["node1:2222", "node1:2223", "node2:2222", "node2:2223"]
    assert index == 3
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert tf_configs.slurm_cluster(port=2222) == (hosts, 0)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # CPU nodes: left alone


def test_slurm_without_its_variables_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.delenv("SLURM_STEP_TASKS_PER_NODE", raising=False)
    with pytest.raises(UserInputError, match="cannot read the SLURM job's layout"):
        tf_configs.slurm_cluster()

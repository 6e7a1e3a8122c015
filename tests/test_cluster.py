"""tfaccel/config/cluster.py: THE reading of TF_CONFIG, for every strategy (TF-free)."""

import json
import re
from pathlib import Path

import pytest

from tfaccel.config import cluster
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

PS_CLUSTER = {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3", "h:4"]}


def test_tf_config_is_read_in_the_cluster_module_only():
    # The launcher writes TF_CONFIG for the processes it starts; nothing else reads it.
    root = Path(cluster.__file__).parents[1]
    readers = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                     if re.search(r"environ(\.get\(|\[)\s*[\"']TF_CONFIG[\"']\s*[,)]",
                                  path.read_text(encoding="utf-8")))
    assert readers == ["config/cluster.py"]


def test_a_parameter_server_cluster_is_read_and_checked(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": PS_CLUSTER,
                                                "task": {"type": "chief", "index": 0}}))
    assert cluster.read_parameter_server_cluster() == PS_CLUSTER
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["h:3"]}}))
    with pytest.raises(UserInputError, match=r"it has no chief, ps \(jobs: \['worker'\]\)"):
        cluster.read_parameter_server_cluster()


def test_a_serving_task_is_a_ps_or_a_worker_of_its_cluster(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": PS_CLUSTER,
                                                "task": {"type": "worker", "index": "1"}}))
    assert cluster.serving_task() == (PS_CLUSTER, "worker", 1)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": PS_CLUSTER,
                                                "task": {"type": "chief", "index": 0}}))
    with pytest.raises(UserInputError, match="must be ps or worker in TF_CONFIG; got task "
                                             r"\{'type': 'chief', 'index': 0\}"):
        cluster.serving_task()

"""ShardedEmbedding on a real parameter-server cluster on 127.0.0.1 (a chief, 2 ps, 1 worker):
its shards are dealt one per server, gradients are sparse per shard, and the weights after
coordinator-scheduled steps equal keras.layers.Embedding's trained in one process."""

import json
import sys
import threading
from io import StringIO
from pathlib import Path

import pytest

from tfaccel.cli import launch

from launch_helpers import TIMEOUT_SECONDS, child_env

pytestmark = [pytest.mark.slow, pytest.mark.multiworker]

CHIEF = Path(__file__).with_name("sharded_embedding_chief.py")


def test_shards_land_on_both_servers_and_train_as_embedding(tmp_path, monkeypatch):
    for key, value in child_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(launch, "worker_command", lambda args: [sys.executable, str(CHIEF)])
    train = launch.TrainArgs(args=["train"], run_dir=None, resume=False)
    out, result = StringIO(), {}
    thread = threading.Thread(daemon=True, target=lambda: result.setdefault(
        "code", launch.run_parameter_server_local(train, ps=2, workers=1, out=out)))
    thread.start()
    thread.join(TIMEOUT_SECONDS)
    assert not thread.is_alive(), out.getvalue()[-4000:]
    assert result["code"] == 0, out.getvalue()[-4000:]
    (line,) = [l for l in out.getvalue().splitlines() if "RESULT " in l]
    found = json.loads(line.split("RESULT ", 1)[1])
    assert found["is_sharded"] and found["rows"] == [25, 25]
    assert sorted(found["devices"]) == ["/job:ps/replica:0/task:0/device:CPU:0",
                                "/job:ps/replica:0/task:1/device:CPU:0"]
    assert found["gradients"][:2] == ["IndexedSlices", "IndexedSlices"]
    assert found["iterations"] == 5
    assert found["trained"] > 1e-3  # the table moved
    assert found["table_diff"] < 1e-5 and found["head_diff"] < 1e-5
    assert found["report"].startswith(
        "sharded: embedding (50x8, 0.00 MiB) in 2 shards over 2 of 2 server(s) [ps 0, ps 1]")

"""ShardedEmbedding on a real parameter-server cluster on 127.0.0.1 (a chief, 2 ps, 1 worker):
its shards are dealt one per server, gradients are sparse per shard, and the weights after
coordinator-scheduled steps equal keras.layers.Embedding's trained in one process; a text
recipe under `tfaccel launch --ps 2 --workers 1` shards its table and trains."""

import json
import subprocess
import sys
import threading
from io import StringIO
from pathlib import Path

import numpy as np
import pytest

from tfaccel.cli import launch

from launch_helpers import ROOT, TIMEOUT_SECONDS, child_env, read_json, run_tfaccel

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


def test_a_text_recipe_under_launch_shards_its_embedding_and_trains(tmp_path):
    recipe = ROOT / "recipes" / "text.yaml"  # text_cnn: a 642 x 64 float32 table, 164 KiB
    sets = ["runtime.strategy=parameter_server", "training.accumulation_steps=1",
            "training.epochs=1", "runtime.min_shard_bytes=16384", "runtime.precision=float32",
            "runtime.tensorboard=false", f"runtime.runs_dir={tmp_path / 'runs'}"]
    code, output = run_tfaccel(["launch", "--ps", "2", "--workers", "1", "--", "train",
                                recipe, *[a for s in sets for a in ("--set", s)]],
                               tmp_path=tmp_path)
    assert code == 0, output[-4000:]
    assert ("parameter servers: 2, workers: 1; sharded: embedding (642x64, 0.16 MiB) in 2 "
            "shards over 2 of 2 server(s) [ps 0, ps 1]; each other variable lives whole on "
            "one parameter server") in output
    (run,) = list((tmp_path / "runs").iterdir())
    summary = read_json(run / "summary.json")
    assert summary["steps_completed"] == summary["steps_per_epoch"] == 125
    assert summary["final_metrics"]["val_accuracy"] > 0.9
    # model.keras holds the whole table as a plain Embedding; the checkpoint its shards.
    saved = subprocess.run(
        [sys.executable, "-c", "import keras, sys; layer = keras.models.load_model("
         "sys.argv[1]).get_layer('embedding'); print(type(layer).__name__, "
         "tuple(layer.embeddings.shape))", run / "model.keras"],
        capture_output=True, text=True, env=child_env(tmp_path), check=True)
    assert saved.stdout.split("\n")[-2] == "Embedding (642, 64)"
    (checkpoint,) = list((run / "checkpoints").glob("ps-step-*.npz"))
    with np.load(checkpoint) as arrays:
        shapes = [arrays[name].shape for name in arrays.files if name != "state"]
    assert shapes[:2] == [(321, 64), (321, 64)]

"""`tfaccel launch` with 2 local CPU workers: same result as one process, one run directory,
every example once, a dying worker stops the job, preemption and resume.

Each test starts real TensorFlow processes (tens of seconds on 2 cores): all are marked
`slow` and `multiworker` and run under a timeout (tests/launch_helpers.py).
"""

import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from launch_helpers import (
    DEFAULT_RECIPE,
    TIMEOUT_SECONDS,
    child_env,
    children,
    kill_tree,
    outputs_of,
    read_json,
    run_tfaccel,
    short_default_args,
    with_worker_logs,
    worker_logs,
)

from tfaccel.data import files_stage

pytestmark = [pytest.mark.slow, pytest.mark.multiworker]


def _weights(run_dir):
    import keras

    model = keras.saving.load_model(run_dir / "model.keras")
    return [w.numpy() for w in model.weights]


def _launch_as_cluster(train_args, *, tmp_path):
    """Both nodes of `launch --hosts ... --index I` on this machine; (codes, outputs)."""
    from tfaccel.cli.tf_configs import free_ports

    hosts = ",".join(f"127.0.0.1:{port}" for port in free_ports(2))
    processes = [subprocess.Popen(
        [sys.executable, "-m", "tfaccel.cli", "launch", "--hosts", hosts, "--index",
         str(index), "--", *map(str, train_args)], env=child_env(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        start_new_session=True) for index in range(2)]
    codes, outputs = outputs_of(processes)
    return codes, "".join(outputs)


# The cluster form without accumulation is outside the CI budget (heavy): the SIGTERM test
# below also compares 2 workers with one process without accumulation.
@pytest.mark.parametrize("accumulation, form", [
    pytest.param(1, "hosts", marks=pytest.mark.heavy), (2, "workers")])
def test_two_workers_end_with_the_weights_of_one_process(tmp_path, shapes_data_dir,
                                                         accumulation, form):
    # Global batch 32: 2 workers x 1 replica x (micro-batch 16, or 2 micro-batches of 8)
    # against one process taking whole batches of 32 (or 4 micro-batches of 8). Once
    # through the cluster form (`--hosts --index` on each "machine", the chief naming its
    # run directory) and once through a local `--workers 2` launch. With a file cache:
    # the workers on this one machine each write their own (one prefix was refused to the
    # second worker by the cache lock).
    import tfaccel

    runs = tmp_path / "runs"
    overrides = short_default_args(shapes_data_dir, runs, "training.epochs=2",
                               "training.steps_per_epoch=3",
                               f"training.accumulation_steps={accumulation}",
                               f"data.cache={tmp_path / 'cache' / 'shapes'}")
    if form == "hosts":
        codes, output = _launch_as_cluster(["train", DEFAULT_RECIPE, *overrides],
                                           tmp_path=tmp_path)
        assert codes == [0, 0], output[-4000:]
    else:
        code, output = run_tfaccel(["launch", "--workers", "2", "--", "train",
                                    DEFAULT_RECIPE, *overrides], tmp_path=tmp_path)
        assert code == 0, output[-4000:]
    (launched,) = list(runs.iterdir())  # exactly one run directory, the chief's
    summary = read_json(launched / "summary.json")
    assert summary["status"] == "completed"
    assert summary["strategy"] == "multi_worker"
    assert summary["replicas"] == 2 and summary["workers"] == 2
    assert sorted(p.name for p in launched.iterdir()) == [
        ".lock", "checkpoints", "data_source.json", "metrics.jsonl", "model.keras",
        "model_source.json", "recipe.yaml", "summary.json"]
    assert read_json(launched / "model_source.json")["name"] == "small_cnn"
    assert len((launched / "metrics.jsonl").read_text().splitlines()) == 2
    # The other worker's scratch folder is gone (its log folder, named, is kept).
    assert [p.name for p in (tmp_path / "tmpdir").iterdir()
            if p.name.startswith("tfaccel-") and not p.name.startswith("tfaccel-launch-logs-")
            ] == []
    if form == "workers":  # each node of the cluster form shows its own one worker
        # Only the chief's lines are shown; the other worker's go to its log, named once.
        assert "[w0] Epoch 2/2" in output and "[w1]" not in output
        assert output.count("the other workers' goes to") == 1
        assert "Epoch 2/2" in worker_logs(output)["w1"]
    else:
        assert "[w0]" in output and "[w1]" in output
    for worker in range(2):
        fingerprint = read_json(tmp_path / "cache" / f"shapes.worker-{worker}-of-2.tfaccel.json")
        # Each worker reads (and caches) every example; the strategy splits them by element.
        assert fingerprint["builder"] == "from_tfds" and fingerprint["input share"] is None

    single_overrides = [o for o in overrides[1::2]] + ["runtime.strategy=one_device"]
    single = tfaccel.train(str(DEFAULT_RECIPE), single_overrides,
                           run_dir=str(tmp_path / "single"))
    assert single.summary["replicas"] == 1
    pairs = list(zip(_weights(launched), _weights(tmp_path / "single")))
    print(f"max weight difference: {max(np.abs(a - b).max() for a, b in pairs):.2e}")
    for got, expected in pairs:
        np.testing.assert_allclose(got, expected, atol=1e-5)
    launched_losses = [r["loss"] for r in map(_json_line, (launched / "metrics.jsonl")
                                              .read_text().splitlines())]
    np.testing.assert_allclose(launched_losses, [r["loss"] for r in single.epochs],
                               rtol=1e-5)


def _json_line(line):
    import json

    return json.loads(line)


COUNT_WORKER = '''
import json, os, sys
import numpy as np
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # joins the cluster first
from tfaccel.config.batching import plan_batches
from tfaccel.config.recipe import recipe_from_dict
from tfaccel.training.model_setup.inputs import build_data

out, configs = sys.argv[1], json.loads(sys.argv[2])


def ids_of(dataset, steps):
    # As Keras' fit reads it: a tf.data.Dataset is split by the strategy (by element), a
    # distributed dataset (split by file before the stream) is read as it is.
    policy = None
    if not isinstance(dataset, tf.distribute.DistributedDataset):
        policy = tf.data.experimental.AutoShardPolicy(
            dataset.options().experimental_distribute.auto_shard_policy).name
        dataset = strategy.experimental_distribute_dataset(dataset)
    iterator, ids = iter(dataset), []
    for _ in range(steps):
        x, _ = next(iterator)
        for local in strategy.experimental_local_results(x):
            ids += np.asarray(local).reshape(-1).astype(int).tolist()
    return ids, policy


seen = {}
plan = plan_batches(global_batch_size=8, replicas=strategy.num_replicas_in_sync)
for name, data in configs.items():
    recipe = recipe_from_dict({"data": data, "seed": 0})
    with strategy.scope():  # as the runner builds it
        built = build_data(recipe, plan, deterministic=True, strategy=strategy)
        steps = built.steps_per_epoch
        two_passes, policy = ids_of(built.make_stream(0), 2 * steps)
        # A resume 5 steps into the second pass: a new stream, as `train --resume` builds.
        resumed, _ = ids_of(built.make_stream(steps + 5), steps - 5)
        if built.info.worker_sharding == "file":
            # Keras' fit (with tfaccel's keras_compat patch) takes the per-worker streams.
            import keras
            from tfaccel.engine.keras_compat import patch_for_multi_worker

            model = keras.Sequential([keras.Input((1,)), keras.layers.Rescaling(1 / 96),
                                      keras.layers.Dense(4)])
            model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
                from_logits=True))
            patch_for_multi_worker(model)
            fitted = model.fit(built.make_stream(0), epochs=1, steps_per_epoch=steps,
                               verbose=0).history["loss"]
    seen[name] = {"passes": [two_passes[:len(two_passes) // 2],
                             two_passes[len(two_passes) // 2:]],
                  "resumed": resumed, "steps": steps, "policy": policy,
                  "sharding": built.info.worker_sharding}
seen["fitted"] = fitted
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
json.dump(seen, open(f"{out}.{index}", "w"))
'''


def _write_records(folder, ids, *, files):
    import tensorflow as tf

    paths = []
    for f, chunk in enumerate(np.array_split(np.asarray(ids), files)):
        path = folder / f"ids-{f}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as writer:
            for i in chunk:
                example = tf.train.Example(features=tf.train.Features(feature={
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(i)])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[int(i) % 4]))}))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def test_every_example_is_seen_exactly_once_per_epoch_across_workers(tmp_path):
    # 96 examples, global batch 8 on 2 workers: 12 steps, 4 examples per worker per step,
    # through the runner's own streams (fresh and resumed). In-memory arrays and a single
    # TFRecord file (like the built-in dataset's) are split by element (DATA); 4 TFRecord
    # files of 24 are divided by file before the stream: each worker reads only its own 2
    # files (example i is in file i // 24) and caches them under its own prefix.
    import json

    from launch_helpers import run_script_on_workers

    ids = np.arange(96)
    np.savez(tmp_path / "ids.npz", x=ids.astype("float32").reshape(-1, 1), y=ids % 4)
    (tmp_path / "four").mkdir()
    (tmp_path / "one").mkdir()
    _write_records(tmp_path / "four", ids, files=4)
    _write_records(tmp_path / "one", ids, files=1)
    common = {"validation_split_name": None, "cache": "memory", "shuffle_buffer": 96,
              "num_classes": 4}
    records = {"source": "tfrecords", "features": {"id": {"dtype": "int64", "shape": [1]},
                                                   "label": {"dtype": "int64"}},
               "image_key": "id", "label_key": "label", **common}
    configs = {"arrays": {"source": "arrays", "path": str(tmp_path / "ids.npz"), **common},
               "four_files": {**records, "path": str(tmp_path / "four" / "*.tfrecord"),
                              "cache": str(tmp_path / "cache4" / "c")},
               "one_file": {**records, "path": str(tmp_path / "one" / "*.tfrecord"),
                            "cache": str(tmp_path / "cache1" / "c")}}
    script = tmp_path / "count_worker.py"
    script.write_text(COUNT_WORKER)
    code, output = run_script_on_workers(script, [tmp_path / "seen", json.dumps(configs)],
                                         workers=2, tmp_path=tmp_path)
    assert code == 0, output[-4000:]
    seen = [json.loads((tmp_path / f"seen.{i}").read_text()) for i in range(2)]
    expected = {"arrays": ("element", "DATA"), "four_files": ("file", None),
                "one_file": ("element", "DATA")}
    for name in configs:
        mine = [seen[w][name] for w in range(2)]
        assert (mine[0]["sharding"], mine[0]["policy"]) == expected[name], name
        assert mine[0]["steps"] == 12
        for p in range(2):  # each pass (epoch): an equal share each, every example once
            first, second = mine[0]["passes"][p], mine[1]["passes"][p]
            assert len(first) == len(second) == 48, name
            assert sorted(first + second) == ids.tolist(), name
        for w in range(2):  # the resumed stream continues each worker's exactly
            assert mine[w]["resumed"] == mine[w]["passes"][1][5 * 4:], name
    # Worker w reads every other file of the one seeded file order (recipe seed 0).
    read_order = files_stage.read_order(list(range(4)), shuffled=True, seed=0)[0]
    for w in range(2):
        read = {i // 24 for p in seen[w]["four_files"]["passes"] for i in p}
        assert read == set(read_order[w::2])  # only this worker's files
        assert (tmp_path / "cache4" / f"c.worker-{w}-of-2.index").exists()
        assert (tmp_path / "cache1" / f"c.worker-{w}-of-2.index").exists()
    assert len(seen[0]["fitted"]) == 1 and seen[0]["fitted"] == seen[1]["fitted"]
    assert "4 TFRecord files divided among 2 workers: worker 1 reads 2 of them" in output
    assert "TFRecord files not divided among 2 workers (1 file(s) for 2 workers)" in output


def _start_launch(tmp_path, overrides):
    from launch_helpers import DEFAULT_RECIPE as recipe

    command = [sys.executable, "-m", "tfaccel.cli", "launch", "--workers", "2", "--",
               "train", str(recipe), *overrides]
    return subprocess.Popen(command, env=child_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                            start_new_session=True)


def _worker_pid(launcher_pid, index):
    import json

    for pid in children(launcher_pid):
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        config = next(e for e in environ if e.startswith(b"TF_CONFIG="))
        if json.loads(config[len(b"TF_CONFIG="):])["task"]["index"] == index:
            return pid
    raise AssertionError(f"no worker {index} under the launcher {launcher_pid}")


def _read_until(process, marker, lines):
    """Reads the launch's output until a line holds `marker` (the test's timeout applies)."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            return
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"{marker!r} never came:\n{''.join(lines)[-4000:]}")


def _finish(process, lines):
    try:
        rest, _ = process.communicate(timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        raise AssertionError(f"the launch hung:\n{''.join(lines)[-4000:]}")
    lines.append(rest)
    return "".join(lines)


@pytest.mark.heavy  # outside the 15-minute CI budget: ~30 s; the lost-peer message is tested in test_lost_peer
def test_a_worker_killed_with_sigkill_stops_the_job_with_a_clear_error(tmp_path,
                                                                        shapes_data_dir):
    runs = tmp_path / "runs"
    process = _start_launch(tmp_path, short_default_args(
        shapes_data_dir, runs, "training.epochs=100", "training.steps_per_epoch=5"))
    lines = []
    try:
        _read_until(process, "Epoch 2/100", lines)
        import os

        os.kill(_worker_pid(process.pid, 1), signal.SIGKILL)
        output = _finish(process, lines)
    finally:
        if process.poll() is None:
            kill_tree(process.pid)
    assert process.returncode == 137, output[-4000:]  # 128 + SIGKILL, the first failure
    assert "w1 exited with signal SIGKILL" in output
    assert "failed: w1 exited first with signal SIGKILL" in output
    # The chief learnt it from TensorFlow's coordination service, which names the task.
    assert "[w0] Error: training failed after 1 finished epoch(s)" in output
    assert "/job:worker/replica:0/task:1" in output
    (run,) = list(runs.iterdir())
    assert read_json(run / "summary.json")["status"] == "failed"
    assert (run / "checkpoints" / "epoch-001").is_dir()


def _sigterm_in_epoch_2(process):
    """Sends SIGTERM to a launch once epoch 2 starts; returns its output (it must exit 143)."""
    lines = []
    try:
        _read_until(process, "Epoch 2/3", lines)
        process.send_signal(signal.SIGTERM)
        output = _finish(process, lines)
    finally:
        if process.poll() is None:
            kill_tree(process.pid)
    assert process.returncode == 143, output[-4000:]
    return output


@pytest.mark.heavy  # outside the 15-minute CI budget: ~65 s; single-process SIGTERM resume is in test_resume, the workers' equal weights here
def test_sigterm_saves_on_every_worker_at_one_step_and_a_launched_resume_is_exact(
        tmp_path, shapes_data_dir):
    # SIGTERM to the launcher in epoch 2 of 3: all workers agree on one step (TensorFlow's
    # PreemptionCheckpointHandler), the chief writes the checkpoint, exit 143; then
    # `launch -- train --resume` finishes the run, and it ends with the weights and
    # per-epoch losses of one uninterrupted process.
    import tfaccel

    runs = tmp_path / "runs"
    overrides = short_default_args(shapes_data_dir, runs, "training.epochs=3",
                               "training.steps_per_epoch=6")
    process = _start_launch(tmp_path, overrides)
    output = with_worker_logs(_sigterm_in_epoch_2(process))
    (run,) = list(runs.iterdir())
    summary = read_json(run / "summary.json")
    assert summary["status"] == "preempted", output[-4000:]
    stopped = [line for line in output.splitlines() if "Error: stopped by SIGTERM" in line]
    assert len(stopped) == 2, output[-4000:]  # both workers, the same step named
    assert stopped[0].split("] ", 1)[1] == stopped[1].split("] ", 1)[1]
    assert f"resume with: tfaccel launch --workers 2 -- train --resume {run}" in output
    # Each worker's own hint names the real run directory too (the chief's).
    assert output.count(f"Resume with: tfaccel train --resume {run}") == 2, output[-4000:]
    assert summary["checkpoint"].startswith(str(run / "checkpoints"))
    assert [p.name for p in (tmp_path / "tmpdir").iterdir()
            if p.name.startswith("tfaccel-worker")] == []

    code, resumed = run_tfaccel(["launch", "--workers", "2", "--", "train", "--resume", run],
                                tmp_path=tmp_path)
    assert code == 0, resumed[-4000:]
    assert "resuming from checkpoint" in resumed
    assert read_json(run / "summary.json")["status"] == "completed"
    records = [_json_line(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]

    single = tfaccel.train(str(DEFAULT_RECIPE), overrides[1::2] +
                           ["runtime.strategy=one_device"], run_dir=str(tmp_path / "single"))
    pairs = list(zip(_weights(run), _weights(tmp_path / "single")))
    print(f"max weight difference: {max(np.abs(a - b).max() for a, b in pairs):.2e}")
    for got, expected in pairs:
        np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose([r["loss"] for r in records],
                               [r["loss"] for r in single.epochs], rtol=1e-5)


FILES_RECIPE = """
name: shards
seed: 0
data:
  source: tfrecords
  path: {path}
  features:
    x: {{dtype: float32, shape: [4]}}
    label: {{dtype: int64}}
  image_key: x
  label_key: label
  num_classes: 4
  validation_split_name: null
  cache: {cache}
  shuffle_buffer: 2000
model:
  name: mlp
  params: {{hidden_units: [16], normalization: none}}
optimizer: {{name: adam, learning_rate: 1e-2}}
training: {{epochs: 3, global_batch_size: 16}}
runtime: {{deterministic: true, precision: float32, tensorboard: false, verbose: 2}}
"""


@pytest.mark.heavy  # three launches (about 80 s here); the data side is counted above
def test_a_job_split_by_file_resumes_exactly_after_sigterm(tmp_path):
    # 4 TFRecord files of 500 examples on 2 workers: each worker reads and caches its own
    # 2 files. SIGTERM in epoch 2, then a launched resume: the weights and per-epoch losses
    # equal those of the same job run without interruption.
    _write_feature_records(tmp_path / "recs", [500] * 4)
    runs = {}
    for name in ("whole", "cut"):
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(FILES_RECIPE.format(path=tmp_path / "recs" / "*.tfrecord",
                                              cache=tmp_path / f"cache-{name}" / "c"))
        runs[name] = (recipe, tmp_path / "runs" / name)
    code, whole = run_tfaccel(["launch", "--workers", "2", "--", "train", runs["whole"][0],
                               "--run-dir", runs["whole"][1]], tmp_path=tmp_path)
    assert code == 0, whole[-4000:]
    # Worker 1's own line, in its log (only the chief's lines are shown).
    assert "worker 1 reads 2 of them (1000 examples); every worker makes 125 steps" in \
        with_worker_logs(whole)
    process = subprocess.Popen(
        [sys.executable, "-m", "tfaccel.cli", "launch", "--workers", "2", "--", "train",
         str(runs["cut"][0]), "--run-dir", str(runs["cut"][1])], env=child_env(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        start_new_session=True)
    _sigterm_in_epoch_2(process)
    code, resumed = run_tfaccel(["launch", "--workers", "2", "--", "train", "--resume",
                                 runs["cut"][1]], tmp_path=tmp_path)
    assert code == 0, resumed[-4000:]
    assert "resuming from checkpoint" in resumed
    summary = read_json(runs["cut"][1] / "summary.json")
    assert summary["status"] == "completed"
    assert summary["dataset"]["worker_sharding"] == "file"
    for got, expected in zip(_weights(runs["cut"][1]), _weights(runs["whole"][1])):
        np.testing.assert_array_equal(got, expected)
    losses = {name: [_json_line(line)["loss"] for line in
                     (run / "metrics.jsonl").read_text().splitlines()]
              for name, (_, run) in runs.items()}
    assert len(losses["cut"]) == 3 and losses["cut"] == losses["whole"]
    for worker in range(2):
        assert (tmp_path / "cache-cut" / f"c.worker-{worker}-of-2.index").exists()


def _write_feature_records(folder, sizes, *, seed=0):
    """TFRecord files part-<f>.tfrecord of 4 features and a label, `sizes[f]` in file f."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    folder.mkdir()
    for f, size in enumerate(sizes):
        with tf.io.TFRecordWriter(str(folder / f"part-{f}.tfrecord")) as writer:
            for x in rng.normal(size=(size, 4)).astype("float32"):
                label = int(x[0] > 0) + 2 * int(x[1] > 0)
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[label]))})).SerializeToString())


@pytest.mark.heavy  # one launch and an evaluation (about 30 s here)
def test_validation_split_unevenly_between_workers_reports_the_whole_split(tmp_path):
    # Six files of different sizes, two held out: on 2 workers TensorFlow splits validation
    # by file, so one worker has more batches than the other. The job must neither hang nor
    # report a per-worker average: its val_accuracy is the saved model's on the whole split.
    from tfaccel.config.recipe import load_recipe
    from tfaccel.data.from_recipe import build_datasets

    _write_feature_records(tmp_path / "recs", [700, 560, 430, 310, 190, 70])
    recipe = tmp_path / "uneven.yaml"
    recipe.write_text(FILES_RECIPE.format(path=tmp_path / "recs" / "*.tfrecord", cache="memory")
                      .replace("validation_split_name: null", "validation_fraction: 0.34")
                      .replace("epochs: 3", "epochs: 1"))
    run_dir = tmp_path / "run"
    code, output = run_tfaccel(["launch", "--workers", "2", "--", "train", recipe,
                                "--run-dir", run_dir], tmp_path=tmp_path)
    assert code == 0, output[-4000:]
    loaded = load_recipe(run_dir / "recipe.yaml")
    _, validation, _ = build_datasets(loaded.data, global_batch_size=16, num_replicas=1,
                                      seed=loaded.seed, deterministic=True)
    held_out = sum(int(x.shape[0]) for x, _ in validation)
    sizes = {700, 560, 430, 310, 190, 70}
    assert held_out in {a + b for a in sizes for b in sizes if a != b}  # two unequal files
    import keras

    expected = keras.saving.load_model(run_dir / "model.keras").evaluate(
        validation, verbose=0, return_dict=True)
    reported = read_json(run_dir / "summary.json")["final_metrics"]
    assert reported["val_accuracy"] == pytest.approx(expected["accuracy"], abs=1e-6)
    assert reported["val_loss"] == pytest.approx(expected["loss"], rel=1e-5)


def test_two_workers_train_an_own_model_from_a_user_module(tmp_path, shapes_data_dir):
    # Each launched worker resolves model.name itself (`file.py:build`, relative to the
    # recipe's folder): both build the same user model, the chief records its source.
    module = tmp_path / "user_models" / "tiny.py"
    module.parent.mkdir()
    module.write_text(
        "import keras\n\n\n"
        "def build(*, input_shape, num_classes, width=8):\n"
        "    inputs = keras.Input(input_shape)\n"
        "    x = keras.layers.Rescaling(1 / 255)(inputs)\n"
        "    x = keras.layers.Conv2D(width, 3, strides=2, activation='relu')(x)\n"
        "    x = keras.layers.GlobalAveragePooling2D()(x)\n"
        "    outputs = keras.layers.Dense(num_classes, activation='softmax',\n"
        "                                 dtype='float32')(x)\n"
        "    return keras.Model(inputs, outputs, name='tiny')\n")
    recipe = module.parent / "recipe.yaml"
    recipe.write_text("model: {name: tiny.py:build, params: {width: 6}}\n")
    runs = tmp_path / "runs"
    code, output = run_tfaccel(["launch", "--workers", "2", "--", "train", recipe,
                                *short_default_args(shapes_data_dir, runs, "training.epochs=1",
                                                "training.steps_per_epoch=3")],
                               tmp_path=tmp_path)
    assert code == 0, output[-4000:]
    (launched,) = list(runs.iterdir())
    summary = read_json(launched / "summary.json")
    assert summary["status"] == "completed" and summary["workers"] == 2
    source = read_json(launched / "model_source.json")
    assert source["kind"] == "module" and source["file"] == str(module)
    assert (launched / "model_source" / "tiny.py").read_text() == module.read_text()
    import keras

    model = keras.saving.load_model(launched / "model.keras")
    assert model.name == "tiny" and model.layers[2].filters == 6

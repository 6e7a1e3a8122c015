"""Your own Keras model: model.name module:callable or file.py:callable, model.path, train(model=)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from tfaccel.cli.main import main

HERE = Path(__file__).parent
CLASSES = 3
# A keras.io-style convnet: the arrays hold raw 0-255 pixels, so it rescales them itself.
CONVNET = """
import keras

def build(*, input_shape, num_classes, width=4):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(width, 3, activation="relu", name="conv")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)
"""
FAST = {"precision": "float32", "verbose": 0, "tensorboard": False}


def _npz(folder, *, n=96, size=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 255, (n, size, size, 3)).astype("float32")
    y = rng.integers(0, CLASSES, n).astype("int64")
    path = folder / "tiny.npz"
    np.savez(path, x=x, y=y)
    return path


def _recipe(folder, model, *, name="own", epochs=1, runtime=None, training=None):
    """A recipe file in `folder` training `model` (the model section) on tiny arrays."""
    _npz(folder)
    recipe = {"name": name, "seed": 1,
              "data": {"source": "arrays", "path": "tiny.npz", "validation_fraction": 0.25,
                       "shuffle_buffer": 64},
              "model": model,
              "training": {"epochs": epochs, "global_batch_size": 16,
                           "steps_per_execution": 1, **(training or {})},
              "runtime": {**FAST, "runs_dir": str(folder / "runs"), **(runtime or {})}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _train(recipe, *args):
    return CliRunner().invoke(main, ["train", str(recipe), *args])


def _run_dir(result):
    assert result.exit_code == 0, result.output
    return Path(result.output.split("Run directory: ")[1].strip().splitlines()[0])


def _weights(path):
    import keras

    return keras.saving.load_model(path, compile=False).get_weights()


# --------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def width_3_run(tmp_path_factory):
    """A `tfaccel train` of convnet.py:build with model.params width 3, shared read-only by
    the module: (its folder, holding convnet.py and the recipe; the run directory). Read by
    the CLI test of a file callable and by compare (a second own-model run beside
    `own_run`, its params differing)."""
    folder = tmp_path_factory.mktemp("width-3")
    (folder / "convnet.py").write_text(CONVNET)
    recipe = _recipe(folder, {"name": "convnet.py:build", "params": {"width": 3}})
    return folder, _run_dir(_train(recipe))


def test_cli_trains_a_file_callable_with_its_params_and_records_the_module(width_3_run):
    tmp_path, run = width_3_run
    import keras

    model = keras.saving.load_model(run / "model.keras", compile=False)
    assert model.get_layer("conv").filters == 3  # model.params reached the callable
    assert model.output_shape == (None, CLASSES)
    source = json.loads((run / "model_source.json").read_text())
    module = str(tmp_path / "convnet.py")
    digest = __import__("hashlib").sha256(CONVNET.encode()).hexdigest()
    assert source == {"kind": "module", "name": f"{module}:build", "file": module,
                      "sha256": digest}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model"] == source and summary["epochs_completed"] == 1
    assert (run / "model_source" / "convnet.py").read_text() == CONVNET


def test_cli_trains_an_import_path_found_in_the_recipe_folder(tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "own_import_convnet.py").write_text(CONVNET)
    recipe = _recipe(tmp_path / "recipes", {"name": "own_import_convnet:build"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the recipe's folder, not the working directory, has it
    clean_path = list(sys.path)
    monkeypatch.setattr(sys, "path", list(clean_path))
    run = _run_dir(_train(recipe))
    source = json.loads((run / "model_source.json").read_text())
    assert source["kind"] == "module" and source["name"] == "own_import_convnet:build"
    assert source["file"] == str(tmp_path / "recipes" / "own_import_convnet.py")
    assert source["search_dir"] == str(tmp_path / "recipes")
    assert _weights(run / "model.keras")[0].shape == (3, 3, 3, 4)  # the default width
    # A resume reads the run directory's recipe: the module is looked up where it was found.
    monkeypatch.setattr(sys, "path", list(clean_path))
    sys.modules.pop("own_import_convnet", None)
    result = CliRunner().invoke(main, ["train", "--resume", str(run), "--set",
                                       "training.epochs=2"])
    assert result.exit_code == 0, result.output
    assert json.loads((run / "summary.json").read_text())["epochs_completed"] == 2


def test_validate_finds_the_module_without_importing_it_or_tensorflow(tmp_path):
    from tf_free import heavy_modules_after

    (tmp_path / "marked.py").write_text("open(__file__ + '.imported', 'w').close()\n"
                                        + CONVNET)
    recipe = _recipe(tmp_path, {"name": "marked.py:build"})
    body = (f"r = CliRunner().invoke(main, ['validate', {str(recipe)!r}])\n"
            "assert r.exit_code == 0, r.output\nassert 'model ' in r.output\n")
    assert heavy_modules_after(body) == []
    assert not (tmp_path / "marked.py.imported").exists()
    # A missing module is found missing there too, before anything is imported.
    missing = _recipe(tmp_path, {"name": "no_such_module_xyz:build"}, name="missing")
    result = CliRunner().invoke(main, ["validate", str(missing)])
    assert result.exit_code == 2
    assert "model.name 'no_such_module_xyz:build': the python module " in result.output


BAD_BUILDERS = {
    "raises": ("def build(*, input_shape, num_classes):\n"
               "    raise ValueError('no GPU for this one')\n",
               {}, ["raised ValueError: no GPU for this one",
                    f"called with input_shape=(8, 8, 3), num_classes={CLASSES}"]),
    "returns_no_model": ("def build(*, input_shape, num_classes):\n    return 42\n",
                         {}, ["returned builtins.int 42, not a keras.Model"]),
    "ten_outputs": (CONVNET.replace("Dense(num_classes", "Dense(10"), {},
                    ["the model's output has shape (batch, 10)",
                     f"the labels need (batch, {CLASSES})"]),
    "no_pooling": (CONVNET.replace("    x = keras.layers.GlobalAveragePooling2D()(x)\n", ""), {},
                   ["output has shape (batch, 6, 6, 3)", f"the labels need (batch, {CLASSES})"]),
    "other_inputs": (CONVNET.replace("shape=input_shape", "shape=(16, 16, 3)"), {},
                     ["takes inputs of shape (batch, 16, 16, 3), but the data gives "
                      "(batch, 8, 8, 3)"]),
    "unknown_param": (CONVNET, {"widht": 3},
                      ["Unknown parameter 'widht' (did you mean 'width'?)",
                       "Known parameters: width"]),
}


@pytest.mark.parametrize("case", sorted(BAD_BUILDERS))
def test_a_bad_builder_exits_2_naming_the_key_and_value(tmp_path, case):
    code, params, expected = BAD_BUILDERS[case]
    (tmp_path / f"bad_{case}.py").write_text("import keras\n" + code)
    recipe = _recipe(tmp_path, {"name": f"bad_{case}.py:build", "params": params})
    result = _train(recipe)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"model.name '{tmp_path / f'bad_{case}.py'}:build'" in text
    for part in expected:
        assert part in text, text
    assert "Traceback" not in result.output
    assert not list((tmp_path / "runs").glob("*"))  # no run directory left behind


@pytest.mark.parametrize("name, expected", [
    ("nope.py:build", "the python source file '{tmp}/nope.py' does not exist"),
    ("no_such_module_xyz:build", "the python module 'no_such_module_xyz' cannot be found"),
    ("convnet.py:biuld", "has no attribute 'biuld' (did you mean 'build'?)"),
    ("broken.py:build", "importing '{tmp}/broken.py' failed: ZeroDivisionError: division by "
                        "zero"),
])
def test_a_missing_module_or_attribute_exits_2(tmp_path, name, expected):
    (tmp_path / "convnet.py").write_text(CONVNET)
    (tmp_path / "broken.py").write_text("1 / 0\n")
    result = _train(_recipe(tmp_path, {"name": name}))
    assert result.exit_code == 2, result.output
    assert "model.name" in result.output
    assert expected.format(tmp=tmp_path) in " ".join(result.output.split())
    assert "Traceback" not in result.output


# --------------------------------------------------------------------------- model.path


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """One finished own-model run (file.py:callable), shared read-only by the module."""
    root = tmp_path_factory.mktemp("own-run")
    (root / "convnet.py").write_text(CONVNET)
    return _run_dir(_train(_recipe(root, {"name": "convnet.py:build"})))


class _FirstWeights:
    """A Keras callback (made lazily) keeping the model's weights when training begins."""

    def __new__(cls):
        import keras

        class First(keras.callbacks.Callback):
            weights = None

            def on_train_begin(self, logs=None):
                First.weights = [np.array(w) for w in self.model.get_weights()]

        return First()


def test_model_path_fine_tunes_the_saved_weights(tmp_path, own_run):
    import tfaccel

    saved = _weights(own_run / "model.keras")
    recipe = _recipe(tmp_path, {"path": str(own_run / "model.keras")}, name="tune")
    first = _FirstWeights()
    result = tfaccel.train(recipe, callbacks=[first])
    assert len(first.weights) == len(saved)
    for a, b in zip(first.weights, saved):
        np.testing.assert_array_equal(a, b)  # training starts from the saved weights
    tuned = _weights(result.run_dir / "model.keras")
    assert any(not np.array_equal(a, b) for a, b in zip(tuned, saved))  # and trains them
    source = result.summary["model"]
    assert source["kind"] == "saved" and source["path"] == str(own_run / "model.keras")
    assert len(source["sha256"]) == 64


def test_model_path_refusals_exit_2(tmp_path, own_run):
    both = _recipe(tmp_path, {"path": str(own_run / "model.keras"), "name": "mlp"}, name="b")
    result = CliRunner().invoke(main, ["validate", str(both)])
    assert result.exit_code == 2
    assert "model.path" in result.output and "model.name 'mlp' would build another" \
        in " ".join(result.output.split())
    # A saved model for other inputs: 16x16 images where the data has 8x8.
    import keras

    other = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(CLASSES, activation="softmax")])
    other.save(tmp_path / "other.keras")
    result = _train(_recipe(tmp_path, {"path": "other.keras"}, name="other"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = " ".join(result.output.split())
    assert f"model.path '{tmp_path / 'other.keras'}': the model takes inputs of shape " \
           "(batch, 16, 16, 3), but the data gives (batch, 8, 8, 3)" in text


# --------------------------------------------------------------------------- resume


def test_resume_refuses_a_changed_module(tmp_path, own_run):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(own_run, run)
    module = Path(json.loads((run / "model_source.json").read_text())["file"])
    original = module.read_text()
    try:
        module.write_text(original.replace("width=4", "width=5"))
        result = CliRunner().invoke(main, ["train", "--resume", str(run), "--set",
                                           "training.epochs=2"])
    finally:
        module.write_text(original)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"the file '{module}' of model '{module}:build' (module) changed since the run " \
           "started" in text
    assert f"the run's copy is '{run / 'model_source' / 'convnet.py'}'" in text
    assert "start a new run" in text and "Traceback" not in result.output


@pytest.mark.slow
def test_an_own_model_run_resumes_bit_exactly(tmp_path):
    (tmp_path / "convnet.py").write_text(CONVNET)
    recipe = _recipe(tmp_path, {"name": "convnet.py:build", "params": {"width": 6}},
                     epochs=3, runtime={"deterministic": True},
                     training={"checkpoint_every_steps": 1})
    args = json.dumps({"workdir": str(tmp_path), "recipe": str(recipe), "overrides": [],
                       "stop_at": 7, "reference": None})
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, str(HERE / "resume_driver.py"), args],
                          capture_output=True, text=True, timeout=600, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(lines[-1][len("RESULT "):])
    assert report["preempted"] and report["checkpoint"] == "step-0000008"
    assert report["weights_max_diff"] == 0.0
    for full, resumed in zip(report["epochs_full"], report["epochs_resumed"]):
        assert full["loss"] == resumed["loss"] and full["val_loss"] == resumed["val_loss"]
    assert len(report["epochs_resumed"]) == 3


# --------------------------------------------------------------------------- Python API


def _builder(*, input_shape, num_classes, width=4):
    import keras

    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(width, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))


def _api_recipe(folder, strategy):
    _npz(folder)
    return {"name": "api", "seed": 2,
            "data": {"source": "arrays", "path": str(folder / "tiny.npz"),
                     "validation_fraction": 0.25, "shuffle_buffer": 64},
            "model": {"params": {"width": 5}},
            "training": {"epochs": 1, "global_batch_size": 16, "steps_per_execution": 1},
            "runtime": {**FAST, "strategy": strategy, "runs_dir": str(folder / "runs")}}


@pytest.mark.parametrize("strategy, replicas", [("one_device", 1), ("mirrored", 2)])
def test_train_takes_a_builder(tmp_path, strategy, replicas, logical_cpus):
    import tfaccel

    result = tfaccel.train(_api_recipe(tmp_path, strategy), model=_builder)
    assert result.summary["replicas"] == replicas
    assert _weights(result.run_dir / "model.keras")[0].shape == (3, 3, 3, 5)  # params
    source = result.summary["model"]
    assert source["kind"] == "builder"
    assert source["name"] == f"{__name__}._builder" and source["file"] == __file__
    assert source["sha256"] == __import__("hashlib").sha256(
        Path(__file__).read_bytes()).hexdigest()
    # A resume must give the same builder.
    with pytest.raises(tfaccel.errors.UserInputError, match="it was started with model"):
        tfaccel.train(resume=result.run_dir, overrides=["training.epochs=2"],
                      model=lambda *, input_shape, num_classes, width: None)


@pytest.mark.parametrize("strategy, replicas", [("one_device", 1), ("mirrored", 2)])
def test_train_takes_a_built_model_and_leaves_it_untouched(tmp_path, strategy, replicas,
                                                           logical_cpus):
    import keras

    import tfaccel

    keras.utils.set_random_seed(5)
    given = _builder(input_shape=(8, 8, 3), num_classes=CLASSES)
    before = [np.array(w) for w in given.get_weights()]
    recipe = _api_recipe(tmp_path, strategy)
    recipe["model"] = {}
    first = _FirstWeights()
    result = tfaccel.train(recipe, model=given, callbacks=[first])
    assert result.summary["replicas"] == replicas
    for a, b, c in zip(first.weights, before, given.get_weights()):
        np.testing.assert_array_equal(a, b)  # training starts from the given weights
        np.testing.assert_array_equal(c, b)  # and the given model is not changed
    assert result.summary["model"]["kind"] == "keras_model"
    assert len(result.summary["model"]["weights_sha256"]) == 64
    with pytest.raises(tfaccel.errors.UserInputError, match="model.params"):
        tfaccel.train(_api_recipe(tmp_path, strategy), model=given)


# --------------------------------------------------------------------------- the tools


CUSTOM = CONVNET.replace("import keras\n", '''import keras


@keras.saving.register_keras_serializable(package="own_model_test")
class Double(keras.layers.Layer):
    def call(self, x):
        return x * 2.0

''').replace("x = keras.layers.GlobalAveragePooling2D()(x)",
             "x = Double()(keras.layers.GlobalAveragePooling2D()(x))")


@pytest.fixture(scope="module")
def custom_layer_run(tmp_path_factory):
    """One finished run of custom_convnet.py:build (a registered custom layer), shared by
    the export test's formats (each exports it into a folder of its own)."""
    root = tmp_path_factory.mktemp("custom-layer")
    (root / "custom_convnet.py").write_text(CUSTOM)
    return _run_dir(_train(_recipe(root, {"name": "custom_convnet.py:build"})))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["keras", "saved_model"])
def test_export_loads_an_own_model_with_a_custom_layer(custom_layer_run, fmt):
    # In a fresh process, like a user's `tfaccel export`: the layer is known only once the
    # run's module is imported. (One timing run: latency is not the subject here.)
    run = custom_layer_run
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-m", "tfaccel.cli", "export", str(run),
                           "--format", fmt, "--latency-runs", "1"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((run / "exports" / f"{fmt}-none" / "export.json").read_text())
    assert report["format"] == fmt and report["validation_examples"] == 24
    assert report["top1_agreement"] == 1.0 and report["max_abs_prob_diff"] <= 1e-6


def test_doctor_bench_and_compare_work_on_own_model_runs(tmp_path, own_run, width_3_run):
    (tmp_path / "convnet.py").write_text(CONVNET)
    recipe = _recipe(tmp_path, {"name": "convnet.py:build", "params": {"width": 2}})
    result = CliRunner().invoke(main, ["doctor", str(recipe), "--json", "--steps", "4",
                                       "--repeats", "1"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["model_examples_per_sec"] > 0
    result = CliRunner().invoke(main, ["bench", str(recipe), "--batches", "2", "--repeats",
                                       "1"])
    assert result.exit_code == 0, result.output
    assert "tfaccel pipeline (parallel)" in result.output
    _, second = width_3_run  # another own-model run, with model.params width 3
    result = CliRunner().invoke(main, ["compare", str(own_run), str(second), "--no-plot"])
    assert result.exit_code == 0, result.output
    assert "model.params" in result.output and "width" in result.output


def test_a_package_module_is_found_without_running_the_package(tmp_path, monkeypatch):
    from tfaccel import python_refs

    package = tmp_path / "own_pkg_xyz"
    package.mkdir()
    (package / "__init__.py").write_text("open(__file__ + '.ran', 'w').close()\n")
    (package / "nets.py").write_text(CONVNET)
    monkeypatch.setattr(sys, "path", list(sys.path))
    python_refs.add_search_dirs([tmp_path])
    assert python_refs.locate("own_pkg_xyz.nets:build", key="model.name") == \
        str(package / "nets.py")
    assert not (package / "__init__.py.ran").exists()
    with pytest.raises(python_refs.UserInputError,
                       match=r"model.name 'own_pkg_xyz.nope:build': the python module "
                             r"'own_pkg_xyz.nope' cannot be found"):
        python_refs.locate("own_pkg_xyz.nope:build", key="model.name")
    with pytest.raises(python_refs.UserInputError, match="must be 'module:attribute'"):
        python_refs.locate("own_pkg_xyz.nets:", key="model.name")


def test_a_compiled_model_is_compiled_again_with_the_recipe_s_settings(tmp_path):
    (tmp_path / "compiled.py").write_text(CONVNET.replace(
        "    return keras.Model(inputs, outputs)\n",
        "    model = keras.Model(inputs, outputs)\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "    return model\n"))
    recipe = _recipe(tmp_path, {"name": "compiled.py:build"})
    result = _train(recipe)
    run = _run_dir(result)
    assert "returned a compiled model; it is compiled again with the recipe's optimizer, " \
           "loss and metrics" in " ".join(result.output.split())
    import keras

    saved = keras.saving.load_model(run / "model.keras")
    assert type(saved.optimizer).__name__ == "Adam"  # the recipe's, not the builder's sgd
    assert saved.loss == "sparse_categorical_crossentropy"


def test_builder_params_are_checked_against_the_signature():
    from tfaccel.errors import UserInputError
    from tfaccel.models import check_builder_params

    def needs_depth(*, input_shape, num_classes, depth, width=4):
        return None

    def open_keywords(**kwargs):
        return None

    check_builder_params(needs_depth, {"depth": 2}, where="b")
    check_builder_params(open_keywords, {"anything": 1}, where="b")
    with pytest.raises(UserInputError, match=r"b: the builder needs parameter 'depth', which "
                                              r"has no default: set it in model.params\."):
        check_builder_params(needs_depth, {}, where="b")
    with pytest.raises(UserInputError, match=r"model.params 'num_classes' is set from the data"):
        check_builder_params(needs_depth, {"depth": 1, "num_classes": 3}, where="b")
    with pytest.raises(UserInputError, match=r"must take input_shape="):
        check_builder_params(lambda *, num_classes: None, {}, where="b")


def test_a_recipe_model_and_a_given_model_together_are_refused(tmp_path):
    import tfaccel

    recipe = _api_recipe(tmp_path, "one_device")
    recipe["model"] = {"name": "mlp"}
    with pytest.raises(tfaccel.errors.UserInputError,
                       match=r"train\(model=\.\.\.\) got a model and the recipe names one too "
                             r"\('mlp' in model.name or model.path\): give one of the two\."):
        tfaccel.train(recipe, model=_builder)
    missing = _recipe(tmp_path, {"path": "gone.keras"}, name="gone")
    result = CliRunner().invoke(main, ["validate", str(missing)])
    assert result.exit_code == 2
    assert f"model.path: the saved model '{tmp_path / 'gone.keras'}' does not exist" \
        in " ".join(result.output.split())


# --------------------------------------------------------------------------- tasks
# A user's builder is told the task and the output width; its model is checked per task.

DENSE_1 = """
import keras

def build(*, input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1, dtype="float32")(x))
"""


def _float_targets(folder, *, n=256, targets=1):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype("float32")
    y = x @ rng.normal(size=(4, targets)) + 0.5
    np.savez(folder / "floats.npz", x=x, y=y if targets > 1 else y[:, 0])


def test_an_own_model_ending_in_dense_1_on_float_targets_trains_as_regression(tmp_path):
    # Was: refused, "labels need (batch, 76)": the float targets were counted as classes.
    (tmp_path / "dense1.py").write_text(DENSE_1)
    _float_targets(tmp_path)
    recipe = _recipe(tmp_path, {"name": "dense1.py:build"}, epochs=2)
    data = yaml.safe_load(recipe.read_text())
    data["data"]["path"] = "floats.npz"
    data["optimizer"] = {"name": "adam", "learning_rate": 0.01}
    recipe.write_text(yaml.safe_dump(data))
    result = _train(recipe)
    run = _run_dir(result)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["task"] == "regression" and summary["dataset"]["num_outputs"] == 1
    assert summary["metric_names"] == ["mae", "rmse"]
    assert "val_mae" in summary["final_metrics"] and "accuracy" not in result.output
    assert result.output.count("Done: val_mae ") == 1


@pytest.mark.parametrize("task, num_classes, num_outputs", [
    ("classification", 3, 3), ("binary", 2, 1), ("multi_label", 4, 4), ("regression", 2, 2)])
def test_a_builder_naming_task_and_num_outputs_is_told_them(task, num_classes, num_outputs):
    from tfaccel.models import build_own_model

    told = {}
    model = build_own_model(_recorder(told), where="b",
                            input_shape=(5,), num_classes=num_classes, params={}, task=task,
                            num_outputs=num_outputs)
    assert told == {"num_classes": num_classes, "task": task, "num_outputs": num_outputs}
    assert model.output_shape == (None, num_outputs)


def _recorder(told):
    def build(*, input_shape, num_classes, task, num_outputs):
        import keras

        told.update(num_classes=num_classes, task=task, num_outputs=num_outputs)
        inputs = keras.Input(shape=input_shape)
        return keras.Model(inputs, keras.layers.Dense(num_outputs)(inputs))
    return build


def test_a_builder_without_task_arguments_is_called_as_before():
    from tfaccel.models import build_own_model

    calls = []

    def build(*, input_shape, num_classes, **params):
        import keras

        calls.append(dict(params))  # task and num_outputs are not pushed into **params
        inputs = keras.Input(shape=input_shape)
        return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(inputs))

    build_own_model(build, where="b", input_shape=(5,), num_classes=3, params={"w": 1},
                    task="classification", num_outputs=3)
    assert calls == [{"w": 1}]


@pytest.mark.parametrize("task, width, head", [
    ("binary", 1, "end with keras.layers.Dense(1, activation='sigmoid')"),
    ("regression", 2, "one value per target of the data's 2 target(s) (end with "
                      "keras.layers.Dense(2)"),
    ("multi_label", 4, "one probability per label of the data's 4 labels (end with "
                       "keras.layers.Dense(4, activation='sigmoid')"),
])
def test_a_model_with_the_wrong_width_is_told_the_task_s_last_layer(task, width, head):
    import keras

    from tfaccel.errors import UserInputError
    from tfaccel.models import check_model_fits

    inputs = keras.Input((5,))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs))
    with pytest.raises(UserInputError) as error:
        check_model_fits(model, where="m", input_shape=(5,), num_classes=width, task=task,
                         num_outputs=width)
    text = str(error.value)
    assert f"the labels need (batch, {width}) for data.task {task}" in text
    assert head in text


def test_task_arguments_are_set_from_the_data_not_model_params():
    from tfaccel.errors import UserInputError
    from tfaccel.models import check_builder_params

    with pytest.raises(UserInputError, match="model.params 'task' is set from the data"):
        check_builder_params(_recorder({}), {"task": "regression"}, where="b")


def test_model_path_of_a_regression_model_trains_on_float_targets(tmp_path):
    import keras

    _float_targets(tmp_path, targets=2)
    inputs = keras.Input((4,))
    keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(tmp_path / "reg.keras")
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(inputs)).save(
        tmp_path / "cls.keras")
    for name, ok in (("reg", True), ("cls", False)):
        recipe = _recipe(tmp_path, {"path": f"{name}.keras"}, name=name)
        data = yaml.safe_load(recipe.read_text())
        data["data"]["path"] = "floats.npz"
        recipe.write_text(yaml.safe_dump(data))
        result = _train(recipe)
        if ok:
            summary = json.loads((_run_dir(result) / "summary.json").read_text())
            assert summary["task"] == "regression" and "val_rmse" in summary["final_metrics"]
        else:
            assert result.exit_code == 2 and "Traceback" not in result.output
            assert "need (batch, 2) for data.task regression" in " ".join(result.output.split())

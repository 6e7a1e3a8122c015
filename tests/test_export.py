"""`tfaccel export`: each format on a tiny trained run, the accuracy check, and each error."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import tfaccel
from tfaccel.cli.main import main
from tfaccel.errors import UserInputError

N_EXAMPLES, FRACTION, SEED, CLASSES = 240, 0.25, 0, 4
FAST = dict(latency_runs=1, latency_calls=2, calibration_examples=32)


def _images(n, seed):
    """Learnable 8x8 RGB images: the class is which quadrant is bright (raw 0-255 pixels)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    x = rng.uniform(0, 60, (n, 8, 8, 3)).astype("float32")
    for i, label in enumerate(y):
        row, col = divmod(int(label), 2)
        x[i, row * 4:row * 4 + 4, col * 4:col * 4 + 4, :] += 150
    return x, y.astype("int64")


def _low_contrast_images(n, seed):
    """Like `_images`, but dim or washed out: the bright quadrant stands 2 to 60 grey levels
    (log-uniform per image) above noise of half that, on a random brightness."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    contrast = np.exp(rng.uniform(np.log(2), np.log(60), n))[:, None, None, None]
    brightness = rng.uniform(0, 255 - 1.5 * contrast)
    x = brightness + rng.uniform(0, 0.5, (n, 8, 8, 3)) * contrast
    for i, label in enumerate(y):
        row, col = divmod(int(label), 2)
        x[i, row * 4:row * 4 + 4, col * 4:col * 4 + 4, :] += contrast[i]
    return x.astype("float32"), y.astype("int64")


def _write_run(directory, model, npz):
    """A run directory as `tfaccel train` leaves it: recipe.yaml and model.keras."""
    from tfaccel.config.recipe import dump_recipe, recipe_from_dict

    recipe = recipe_from_dict({
        "name": "tiny-export", "seed": SEED,
        "data": {"source": "arrays", "path": str(npz), "validation_fraction": FRACTION,
                 "shuffle_buffer": 256, "augment": ["flip"]},
        "model": {"name": "small_cnn", "params": {"filters": [4, 8], "dense_units": 8}},
        "training": {"global_batch_size": 32}})
    directory.mkdir(parents=True)
    (directory / "recipe.yaml").write_text(dump_recipe(recipe))
    if model is not None:
        model.save(directory / "model.keras")
    return directory


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One trained tiny run shared by the module: (run_dir, x, y, validation indices)."""

    from tfaccel.data import splits

    root = tmp_path_factory.mktemp("export")
    x, y = _images(N_EXAMPLES, SEED)
    npz = root / "tiny.npz"
    np.savez(npz, x=x, y=y)
    _, val_idx = splits.split_indices(N_EXAMPLES, FRACTION, SEED)
    model = _trained_tiny_cnn(x, y)
    run_dir = _write_run(root / "run", model, npz)
    return {"run_dir": run_dir, "x": x, "y": y, "val_idx": val_idx, "npz": npz,
            "root": root, "model": model}


def _trained_tiny_cnn(x, y):
    """A small_cnn trained 15 epochs on the training part of (x, y), the run's split."""
    import keras

    from tfaccel import models
    from tfaccel.data import splits

    train_idx, _ = splits.split_indices(N_EXAMPLES, FRACTION, SEED)
    keras.utils.set_random_seed(SEED)
    model = models.build_model("small_cnn", input_shape=(8, 8, 3), num_classes=CLASSES,
                               filters=(4, 8), dense_units=8)
    model.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy")
    model.fit(x[train_idx], y[train_idx], epochs=15, batch_size=32, verbose=0)
    return model


@pytest.fixture(scope="module")
def low_contrast(tmp_path_factory):
    """A trained tiny run on `_low_contrast_images`: the run directory."""


    root = tmp_path_factory.mktemp("low-contrast")
    x, y = _low_contrast_images(N_EXAMPLES, SEED)
    np.savez(root / "low.npz", x=x, y=y)
    return _write_run(root / "run", _trained_tiny_cnn(x, y), root / "low.npz")


# The docs' three LiteRT int8 commands (Export), by their options and default folders.
INT8_COMMANDS = {
    "litert-int8-calibration-32": {},
    "litert-int8-per-tensor-strip-calibration-32": {"per_tensor": True, "strip": True},
    "litert-int8-outside-per-tensor-strip-calibration-32": {
        "preprocessing": "outside", "per_tensor": True, "strip": True},
}


@pytest.fixture(scope="module")
def int8_exports(tiny, tmp_path_factory):
    """The docs' three int8 exports of a copy of the tiny run, each into its default folder
    (LiteRT conversions are the slow part of this file): (run_dir, {folder name: report}).
    Read by the three-commands test and by the int8 tests of the default and the smallest
    options."""
    pytest.importorskip("ai_edge_litert")
    run = tmp_path_factory.mktemp("int8-exports") / "run"
    shutil.copytree(tiny["run_dir"], run)
    reports = {name: tfaccel.export(run, format="litert", quantize="int8", **options, **FAST)
               for name, options in INT8_COMMANDS.items()}
    return run, reports


def _keras_accuracy(tiny):
    model = tiny["model"]
    val = tiny["val_idx"]
    predicted = np.argmax(model.predict(tiny["x"][val], verbose=0), axis=-1)
    return float(np.mean(predicted == tiny["y"][val])), predicted


def _read_report(out):
    return json.loads((out / "export.json").read_text())


def _assert_report_is_the_interpreters(report, *, interpreter, inputs, tiny):
    """The report's accuracy and agreement are what `interpreter` gives on `inputs`."""
    source = interpreter.get_input_details()[0]
    interpreter.resize_tensor_input(source["index"], [len(inputs), *source["shape"][1:]])
    interpreter.allocate_tensors()
    interpreter.set_tensor(source["index"], inputs)
    interpreter.invoke()
    predicted = np.argmax(interpreter.get_tensor(
        interpreter.get_output_details()[0]["index"]), axis=-1)
    expected_float, float_predicted = _keras_accuracy(tiny)
    assert report["accuracy"] == pytest.approx(np.mean(predicted == tiny["y"][tiny["val_idx"]]))
    assert report["float_accuracy"] == pytest.approx(expected_float)
    assert report["top1_agreement"] == pytest.approx(np.mean(predicted == float_predicted))


REQUIRED = {"format", "quantize", "size_bytes", "float_size_bytes", "accuracy",
            "float_accuracy", "top1_agreement", "latency_ms", "float_latency_ms"}


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize("fmt,artifact", [("litert", "model.tflite"), ("onnx", "model.onnx"),
                                          ("saved_model", "saved_model"),
                                          ("keras", "model.keras")])
def test_float_export_of_each_format_matches_the_keras_model(tiny, tmp_path, fmt, artifact):
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("tf2onnx")
    if fmt == "litert":
        pytest.importorskip("ai_edge_litert")
    out = tmp_path / f"{fmt}-none"
    report = tfaccel.export(tiny["run_dir"], format=fmt, out=out, **FAST)
    expected, _ = _keras_accuracy(tiny)
    assert (out / artifact).exists()
    assert _read_report(out) == report
    assert REQUIRED <= set(report)
    assert report["format"] == fmt and report["quantize"] == "none"
    # The run's validation split, read through its recipe: 25% of 240 examples.
    assert report["validation_examples"] == len(tiny["val_idx"]) == 60
    # Loaded back with its own runtime, the float export predicts what Keras predicts.
    assert report["accuracy"] == pytest.approx(expected, abs=1e-9)
    assert expected > 0.8  # the tiny model learned: the check compares something real
    assert report["top1_agreement"] == 1.0
    assert report["size_bytes"] == report["float_size_bytes"] > 0
    assert report["latency_ms"] > 0


def test_litert_int8_is_full_integer_and_checked_against_the_float_export(tiny, int8_exports):
    from tfaccel.tools.export.format_litert import load_litert_interpreter

    run, reports = int8_exports
    out = run / "exports" / "litert-int8-calibration-32"
    report = reports[out.name]
    assert report["out"] == str(out) and _read_report(out) == report
    assert report["calibration_examples"] == 32
    # The input preprocessing (1/255 rescaling, then the per-image standardisation's
    # moments and scaling) stays float32 on purpose, and nothing else; every layer with
    # weights is int8.
    kept = report["float_preprocessing_ops"]
    assert [op.split(" ")[0] for op in kept] == [
        "MUL", "MEAN", "NEG", "SQUARED_DIFFERENCE", "MEAN", "ADD", "RSQRT", "MUL", "MUL",
        "ADD"]
    assert "rescaling" in kept[0] and all("per_image_standardization" in op
                                          for op in kept[1:])
    assert report["float_ops"] == kept and report["integer_only"] is False
    interpreter = load_litert_interpreter(out / "model.tflite")
    # Raw float32 pixels in, as model.keras takes them; quantized after the preprocessing.
    assert report["input"] == {"shape": [None, 8, 8, 3], "dtype": "float32",
                               "is": "model.keras' input (tfaccel's models: raw 0-255 pixels)"}
    source = interpreter.get_input_details()[0]
    assert source["dtype"] == np.float32 and list(source["shape"][1:]) == [8, 8, 3]
    ops = [op["op_name"] for op in interpreter._get_ops_details()]
    assert ops[:len(kept) + 2] == [op.split(" ")[0] for op in kept] + ["QUANTIZE", "CONV_2D"]
    weights = [t for t in interpreter.get_tensor_details() if "conv2d" in t["name"]
               and len(t["shape"]) == 4 and t["shape"][0] in (4, 8)]
    assert weights and all(t["dtype"] == np.int8 for t in weights)
    # The reported numbers are what the interpreter gives on the validation split.
    _assert_report_is_the_interpreters(report, interpreter=interpreter,
                                       inputs=tiny["x"][tiny["val_idx"]], tiny=tiny)
    # (A model this small is mostly file overhead; sizes are compared in benchmarks/.)
    assert report["size_ratio"] == pytest.approx(report["float_size_bytes"]
                                                 / report["size_bytes"])
    # Where the bytes go adds up to each file's size, and the weights are where they
    # belong: 492 kernel values (3x3x3x4 + 3x3x4x8 + 8x8 + 8x4) and 24 biases.
    export, floats = report["size_breakdown"], report["float_size_breakdown"]
    assert sum(export.values()) == report["size_bytes"]
    assert sum(floats.values()) == report["float_size_bytes"]
    kernels, biases = 492, 24
    # float32: every weight and bias at 4 bytes, plus the Rescaling and epsilon scalars.
    assert floats["constants_float32"] == 4 * (kernels + biases) + 4 * 2
    assert floats["quantization_parameters"] == 0
    # int8: kernels at 1 byte, int32 biases, the MEAN axes (2 x int32); in float32 only the
    # preprocessing's two scalars (1/255 and the standardisation's epsilon).
    assert export["constants_int8"] == kernels
    assert export["constants_int32"] == 4 * biases + 8
    assert export["constants_float32"] == 4 * 2
    # Per output channel, a float32 scale and an int64 zero point for each kernel and bias.
    assert export["quantization_parameters"] >= 2 * biases * (4 + 8)
    assert export["tensor_names"] > 0 and export["structure"] > 0


def test_litert_int8_default_keeps_accuracy_within_a_point_on_low_contrast_images(
        low_contrast, tmp_path):
    """The plain `--quantize int8`, on images whose contrast int8 steps would erase.

    With the raw pixels and the per-image standardisation quantized (before the fix), this
    export lost 16.7 points (0.8333 against 1.0); in float32 inside the model, none.
    """
    pytest.importorskip("ai_edge_litert")
    report = tfaccel.export(low_contrast, format="litert", quantize="int8",
                            out=tmp_path / "int8", **FAST)
    assert report["float_accuracy"] > 0.9  # standardised in float, the task is learnable
    assert abs(report["accuracy_delta"]) <= 0.01
    assert report["top1_agreement"] >= 0.99
    assert report["float_preprocessing_ops"] and report["preprocessing"] == "inside"


def test_litert_int8_smallest_options_are_checked_like_for_like(tiny, int8_exports):
    """--preprocessing outside --per-tensor --strip: the README's >= 3.5x configuration."""
    import keras

    from tfaccel.tools.export.format_litert import load_litert_interpreter

    run, reports = int8_exports
    out = run / "exports" / "litert-int8-outside-per-tensor-strip-calibration-32"
    report = reports[out.name]
    assert report["out"] == str(out) and _read_report(out) == report
    assert (report["preprocessing"], report["per_tensor"], report["strip"]) == (
        "outside", True, True)
    # The weightless leading layers went to preprocessing.keras, and with them the only
    # op that had no int8 kernel: the model file is integer-only.
    assert report["preprocessing_layers"] == ["rescaling", "per_image_standardization"]
    assert report["input"]["is"].startswith("the output of preprocessing.keras")
    assert report["preprocessing_path"] == str(out / "preprocessing.keras")
    assert report["integer_only"] is True and report["float_ops"] == []
    assert report["float_preprocessing_ops"] == []
    prefix = keras.saving.load_model(out / "preprocessing.keras", compile=False)
    assert not prefix.weights
    # Stripped: no names, no signatures, no conversion metadata, in both files.
    interpreter = load_litert_interpreter(out / "model.tflite")
    assert interpreter.get_signature_list() == {}
    assert all(t["name"] == "" for t in interpreter.get_tensor_details())
    for breakdown in (report["size_breakdown"], report["float_size_breakdown"]):
        assert breakdown["tensor_names"] == 0
        assert breakdown["metadata"] == 16  # min_runtime_version only
    # Per tensor: every int8 weight has one scale (per channel, a conv has one per filter).
    weights = [t for t in interpreter.get_tensor_details()  # activations: batch of 1
               if t["dtype"] == np.int8 and len(t["shape"]) in (2, 4) and t["shape"][0] != 1]
    assert len(weights) == 4  # two convolutions, two dense layers
    assert all(len(t["quantization_parameters"]["scales"]) == 1 for t in weights)
    # The numbers are preprocessing.keras then the interpreter, on the validation split,
    # and the float model of the same cut predicts what the whole Keras model predicts.
    val = tiny["val_idx"]
    features = prefix.predict(tiny["x"][val], verbose=0)
    source = interpreter.get_input_details()[0]
    assert list(source["shape"][1:]) == [8, 8, 3] and source["dtype"] == np.float32
    _assert_report_is_the_interpreters(report, interpreter=interpreter, inputs=features,
                                       tiny=tiny)
    assert sum(report["size_breakdown"].values()) == report["size_bytes"]
    assert sum(report["float_size_breakdown"].values()) == report["float_size_bytes"]
    # Per tensor: one float32 scale + one int64 zero point per quantized tensor.
    quantized = [t for t in interpreter.get_tensor_details()
                 if len(t["quantization_parameters"]["scales"])]
    assert report["size_breakdown"]["quantization_parameters"] == 12 * len(quantized)


def test_split_preprocessing_cuts_the_leading_weightless_layers(tiny):
    import keras

    from tfaccel import models
    from tfaccel.tools.export.keras_model import split_preprocessing

    model = keras.saving.load_model(tiny["run_dir"] / "model.keras", compile=False)
    prefix, rest = split_preprocessing(model)
    assert [layer.name for layer in prefix.layers[1:]] == ["rescaling",
                                                          "per_image_standardization"]
    assert len(rest.weights) == len(model.weights) == 8
    x = tiny["x"][:16]
    np.testing.assert_array_equal(rest.predict(prefix.predict(x, verbose=0), verbose=0),
                                  model.predict(x, verbose=0))
    bare = models.build_model("small_cnn", input_shape=(8, 8, 3), num_classes=CLASSES,
                              filters=(4,), dense_units=0, normalization="none")
    with pytest.raises(UserInputError, match=r"no weightless layers before its first layer "
                                             r"with weights \(conv2d.*Conv2D\)"):
        split_preprocessing(bare)


@pytest.mark.parametrize("fmt,mode", [("litert", "dynamic"), ("litert", "float16"),
                                      ("onnx", "dynamic")])
def test_dynamic_and_float16(tiny, tmp_path, fmt, mode):
    pytest.importorskip("ai_edge_litert" if fmt == "litert" else "onnxruntime")
    report = tfaccel.export(tiny["run_dir"], format=fmt, quantize=mode,
                            out=tmp_path / mode, **FAST)
    assert report["quantize"] == mode
    assert report["top1_agreement"] >= 0.95
    assert abs(report["accuracy"] - report["float_accuracy"]) <= 0.05


@pytest.mark.parametrize("per_tensor", [False, True])
def test_onnx_int8_is_calibrated_and_checked(tiny, tmp_path, per_tensor):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tf2onnx")
    import onnx
    from onnx import numpy_helper

    out = tmp_path / "onnx-int8"
    report = tfaccel.export(tiny["run_dir"], format="onnx", quantize="int8", out=out,
                            per_tensor=per_tensor, **FAST)
    assert report["per_tensor"] is per_tensor
    graph = onnx.load(str(out / "model.onnx")).graph
    assert any(node.op_type == "QuantizeLinear" for node in graph.node)
    # The weights' DequantizeLinear scales: one per output channel, or one per tensor.
    constants = {c.name: numpy_helper.to_array(c) for c in graph.initializer}
    scales = [constants[node.input[1]] for node in graph.node
              if node.op_type == "DequantizeLinear" and node.input[0] in constants
              and constants[node.input[0]].ndim >= 2]
    assert len(scales) == 4  # two convolutions, two dense layers
    assert all((s.size == 1) is per_tensor for s in scales)
    assert report["calibration_examples"] == 32
    assert report["top1_agreement"] >= 0.9
    assert not (out / "float-model.onnx").exists()


def _dense_layer_names(run_dir):
    # Keras numbers auto-named layers per process ("dense", "dense_99"): read the run's own.
    import keras

    model = keras.saving.load_model(run_dir / "model.keras", compile=False)
    names = [layer.name for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    assert len(names) == 2 and names[-1] == "predictions"
    return names


def test_keras_int8_quantizes_the_dense_layers_in_framework(tiny, tmp_path):
    import keras

    out = tmp_path / "keras-int8"
    result = CliRunner().invoke(main, ["export", str(tiny["run_dir"]), "--format", "keras",
                                       "--quantize", "int8", "--out", str(out),
                                       "--latency-runs", "1"])
    assert result.exit_code == 0, result.output
    assert "keras int8" in result.output and "export.json" in result.output
    report = _read_report(out)
    names = _dense_layer_names(tiny["run_dir"])
    assert report["quantized_layers"] == names
    loaded = keras.saving.load_model(out / "model.keras", compile=False)
    assert loaded.get_layer(names[0]).quantization_mode == "int8"
    assert report["top1_agreement"] >= 0.9


def test_saved_model_int8_exports_the_keras_quantized_model(tiny, tmp_path):
    report = tfaccel.export(tiny["run_dir"], format="saved_model", quantize="int8",
                            out=tmp_path / "sm-int8", **FAST)
    assert report["quantized_layers"] == _dense_layer_names(tiny["run_dir"])
    assert report["top1_agreement"] >= 0.9


def test_int8_calibration_reads_training_data_without_augmentation(tiny, monkeypatch):
    from tfaccel.config.recipe import load_recipe
    from tfaccel.tools.export.examples import calibration_arrays

    recipe = load_recipe(tiny["run_dir"] / "recipe.yaml")
    assert list(recipe.data.augment) == ["flip"]
    seen = {}
    from tfaccel.data import from_recipe as data_config

    real = data_config.build_datasets

    def spy(config, **kwargs):
        seen["augment"], seen["cache"] = list(config.augment), config.cache
        return real(config, **kwargs)

    monkeypatch.setattr(data_config, "build_datasets", spy)
    examples = calibration_arrays(recipe, count=50)
    assert seen == {"augment": [], "cache": ""}
    assert examples.shape == (50, 8, 8, 3)
    # Training examples, never validation ones.
    train_rows = {x.tobytes() for x in tiny["x"][np.setdiff1d(np.arange(N_EXAMPLES),
                                                              tiny["val_idx"])]}
    assert all(e.tobytes() in train_rows for e in examples)


def test_mixed_precision_model_is_exported_in_float32(tiny, tmp_path):
    import keras

    from tfaccel import models
    from tfaccel.tools.export.keras_model import load_float32_model

    previous = keras.mixed_precision.global_policy().name
    try:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        model = models.build_model("small_cnn", input_shape=(8, 8, 3), num_classes=CLASSES,
                                   filters=(4, 8), dense_units=8)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    model.save(tmp_path / "mixed.keras")
    loaded = load_float32_model(tmp_path / "mixed.keras")
    assert {layer.dtype_policy.name for layer in loaded.layers} == {"float32"}
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name, shape, params", [
    ("text_cnn", (None,), {"vocab_size": 30, "filters": (8,)}),
    ("seq_cnn", (None, 1), {"filters": (8, 8)}),
])
def test_mixed_precision_model_with_keras_ops_is_loaded_in_float32(tmp_path, name, shape,
                                                                   params):
    # Models written with keras.ops between their layers (masks, masked pooling): the ops
    # are Operations, not Layers, and take no dtype policy.
    import keras

    from tfaccel import models
    from tfaccel.tools.export.keras_model import load_float32_model

    previous = keras.mixed_precision.global_policy().name
    try:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        model = models.build_model(name, input_shape=shape, num_classes=3, **params)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    model.save(tmp_path / "mixed.keras")
    loaded = load_float32_model(tmp_path / "mixed.keras")
    assert {layer.dtype_policy.name for layer in loaded.layers
            if isinstance(layer, keras.layers.Layer)} == {"float32"}
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 30, (4, 12)).astype("int32") if name == "text_cnn"
         else rng.uniform(-1, 1, (4, 50, 1)).astype("float32"))
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0),
                               atol=3e-2)


def test_public_name_is_the_function_even_after_importing_the_module():
    import tfaccel.tools.export

    assert tfaccel.export is tfaccel.tools.export.export
    assert callable(tfaccel.export)


# --------------------------------------------------------------------------- errors


def _cli(*args):
    return CliRunner().invoke(main, ["export", *map(str, args)])


def test_run_without_model_keras_exits_2_and_writes_nothing(tiny, tmp_path):
    run_dir = _write_run(tmp_path / "interrupted", None, tiny["npz"])
    out = tmp_path / "out"
    result = _cli(run_dir, "--format", "litert", "--out", out)
    assert result.exit_code == 2
    assert "has no model.keras" in result.output and "--resume" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_unknown_format_and_unsupported_mode_exit_2(tiny, tmp_path):
    result = _cli(tiny["run_dir"], "--format", "tflite")
    assert result.exit_code == 2
    assert "unknown export format 'tflite'" in result.output
    result = _cli(tiny["run_dir"], "--format", "keras", "--quantize", "float16")
    assert result.exit_code == 2
    assert "--format keras does not support --quantize float16" in result.output
    result = _cli(tiny["run_dir"], "--format", "litert", "--quantize", "int4")
    assert result.exit_code == 2 and "unknown quantize mode 'int4'" in result.output


@pytest.mark.parametrize("args,message", [
    (["--format", "litert", "--quantize", "dynamic", "--per-tensor"],
     "--per-tensor applies to --quantize int8 with --format litert or onnx"),
    (["--format", "keras", "--quantize", "int8", "--per-tensor"],
     "got --format keras --quantize int8"),
    (["--format", "onnx", "--strip"], "--strip applies to --format litert"),
    (["--format", "litert", "--preprocessing", "before"],
     "unknown preprocessing placement 'before'; choose inside or outside"),
])
def test_options_a_format_or_mode_lacks_exit_2(tiny, tmp_path, args, message):
    out = tmp_path / "out"
    result = _cli(tiny["run_dir"], *args, "--out", out)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_a_layer_the_converter_cannot_quantize_exits_2_and_leaves_nothing(tiny, tmp_path):
    pytest.importorskip("ai_edge_litert")
    import keras

    # LiteRT has no int8 CONV_3D: the converter leaves it float32 without an error.
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.Reshape((8, 8, 3, 1))(inputs)
    h = keras.layers.Conv3D(2, 3, padding="same", activation="relu")(h)
    h = keras.layers.GlobalAveragePooling3D()(h)
    model = keras.Model(inputs, keras.layers.Dense(CLASSES, activation="softmax")(h))
    run_dir = _write_run(tmp_path / "conv3d", model, tiny["npz"])
    parent = tmp_path / "exports"
    out = parent / "int8"
    result = _cli(run_dir, "--format", "litert", "--quantize", "int8", "--out", out,
                  "--calibration-examples", "8", "--latency-runs", "1")
    assert result.exit_code == 2, result.output
    assert "cannot quantize these layers" in result.output and "CONV_3D" in result.output
    assert "conv3d" in result.output
    assert not out.exists()
    assert os.listdir(parent) == []  # no half-written staging folder either


def test_existing_out_is_never_overwritten(tiny, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = _cli(tiny["run_dir"], "--format", "keras", "--out", out)
    assert result.exit_code == 2 and "already exists" in result.output
    assert os.listdir(out) == ["keep.txt"]


def test_out_under_a_file_exits_2(tiny, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = _cli(tiny["run_dir"], "--format", "keras", "--out", blocker / "sub")
    assert result.exit_code == 2 and "cannot create --out" in result.output


def test_missing_optional_package_names_the_extra(monkeypatch):
    import importlib.util

    from tfaccel.tools import export as exporting

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(UserInputError, match=r"onnxruntime.*pip install 'tfaccel\[export\]'"):
        exporting.check_dependencies("onnx")
    exporting.check_dependencies("keras")  # needs nothing optional


def test_keras_int8_without_a_quantizable_layer_is_a_user_error():
    import keras

    from tfaccel.tools.export.format_keras import keras_int8

    inputs = keras.Input((8, 8, 3))
    outputs = keras.layers.Softmax()(keras.layers.GlobalAveragePooling2D()(
        keras.layers.Conv2D(4, 3)(inputs)))
    with pytest.raises(UserInputError, match="no layer of this model can be quantized"):
        keras_int8(keras.Model(inputs, outputs))


def test_a_bad_format_is_reported_before_tensorflow_loads(tmp_path):
    from tf_free import heavy_modules_after

    body = (f"r = CliRunner().invoke(main, ['export', {str(tmp_path)!r}, '--format', 'pb'])\n"
            "assert r.exit_code == 2, r.output\n")
    assert heavy_modules_after(body) == []


def test_missing_run_dir_and_a_recipe_without_validation_data_exit_2(tiny, tmp_path):
    result = _cli(tmp_path / "nowhere", "--format", "keras")
    assert result.exit_code == 2 and "does not exist" in result.output
    from tfaccel.config.recipe import dump_recipe, load_recipe

    run_dir = tmp_path / "no-validation"
    run_dir.mkdir()
    recipe = load_recipe(tiny["run_dir"] / "recipe.yaml",
                         overrides=["data.validation_fraction=0.0"])
    (run_dir / "recipe.yaml").write_text(dump_recipe(recipe))
    tiny["model"].save(run_dir / "model.keras")
    result = _cli(run_dir, "--format", "keras", "--out", tmp_path / "out")
    assert result.exit_code == 2 and "has no validation data" in result.output
    assert not (tmp_path / "out").exists()



def test_export_says_which_epoch_model_keras_holds(tiny, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny["run_dir"], run)
    (run / "summary.json").write_text(json.dumps({
        "status": "completed", "epochs_completed": 10, "saved_model_epoch": 6,
        "keep": "best", "monitor": "val_accuracy"}))
    result = _cli(run, "--format", "keras", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "Exported model.keras of epoch 6 of 10 (best by val_accuracy)." in result.output
    assert _read_report(tmp_path / "out")["model_epoch"] == "epoch 6 of 10 (best by val_accuracy)"


# --------------------------------------------------------------------------- default folder


def test_the_default_folder_names_every_option_that_changes_the_export():
    from tfaccel.tools.export import default_out

    def name(**options):
        return default_out("run", **options).relative_to(Path("run") / "exports").as_posix()

    assert name(format="litert", quantize="int8") == "litert-int8"
    assert name(format="litert", quantize="int8", per_tensor=True,
                strip=True) == "litert-int8-per-tensor-strip"
    assert name(format="litert", quantize="int8", preprocessing="outside", per_tensor=True,
                strip=True) == "litert-int8-outside-per-tensor-strip"
    assert name(format="onnx", quantize="int8",
                calibration_examples=32) == "onnx-int8-calibration-32"
    # Keras' int8 reads no calibration data; latency options change no file.
    assert name(format="keras", quantize="int8", calibration_examples=32) == "keras-int8"
    assert name(format="saved_model") == "saved_model-none"


def test_the_three_export_commands_of_the_docs_write_three_folders(int8_exports):
    run, reports = int8_exports  # the three commands, one after another in one run
    for report in reports.values():
        assert (Path(report["out"]) / "model.tflite").is_file()
    assert sorted(os.listdir(run / "exports")) == [
        "litert-int8-calibration-32", "litert-int8-outside-per-tensor-strip-calibration-32",
        "litert-int8-per-tensor-strip-calibration-32"]


def test_a_taken_default_folder_is_refused_before_any_work(tiny, tmp_path, monkeypatch):
    from tfaccel.tools import export as exporting

    run = tmp_path / "run"
    shutil.copytree(tiny["run_dir"], run)
    (run / "exports" / "litert-int8-per-tensor-strip").mkdir(parents=True)

    def no_work(*args, **kwargs):
        raise AssertionError("the run was read before the clash was found")

    monkeypatch.setattr(exporting, "_check_run_dir", no_work)
    monkeypatch.setattr(exporting, "_export_into", no_work)
    with pytest.raises(UserInputError, match="litert-int8-per-tensor-strip' already exists"):
        tfaccel.export(run, format="litert", quantize="int8", per_tensor=True, strip=True)


def test_the_cli_refuses_a_taken_default_folder_before_tensorflow_loads(tmp_path):
    from tf_free import heavy_modules_after

    (tmp_path / "exports" / "litert-int8").mkdir(parents=True)
    body = (f"r = CliRunner().invoke(main, ['export', {str(tmp_path)!r}, '--format', 'litert',"
            " '--quantize', 'int8'])\n"
            "assert r.exit_code == 2, r.output\n"
            "assert \"exports/litert-int8' already exists\" in r.output, r.output\n"
            "assert 'Traceback' not in r.output\n")
    assert heavy_modules_after(body) == []


# --------------------------------------------------------------------------- by task


def test_binary_and_multi_label_exports_are_judged_by_their_0_5_decisions():
    from tfaccel.tools.export.agreement import figures

    labels = np.array([[1.0], [0.0], [1.0], [0.0]])
    binary = figures("binary", {"export": np.array([[0.9], [0.6], [0.4], [0.1]]),
                                "float": np.array([[0.8], [0.4], [0.7], [0.2]])}, labels)
    # export decides 1, 1, 0, 0 (2 of 4 right); float 1, 0, 1, 0 (all right).
    assert (binary["accuracy"], binary["float_accuracy"]) == (0.5, 1.0)
    assert binary["agreement"] == 0.5 and "top1_agreement" not in binary
    assert binary["max_abs_prob_diff"] == pytest.approx(0.3)
    multi = figures("multi_label", {"export": np.array([[0.9, 0.2], [0.7, 0.8]]),
                                    "float": np.array([[0.8, 0.6], [0.6, 0.9]])},
                    np.array([[1, 0], [1, 1]]))
    assert multi["binary_accuracy"] == 1.0 and multi["float_binary_accuracy"] == 0.75
    assert multi["per_label_agreement"] == [1.0, 0.5] and multi["agreement"] == 0.75


def test_a_regression_export_is_judged_by_its_error_relative_to_the_targets_scale():
    from tfaccel.tools.export.agreement import figure_rows, figures

    targets = np.array([0.0, 10.0, 20.0, 30.0])
    report = figures("regression", {"export": np.array([[1.0], [10.0], [21.0], [30.0]]),
                                    "float": np.array([[0.0], [10.5], [20.0], [30.0]])},
                     targets)
    assert report["mae"] == pytest.approx(0.5) and report["float_mae"] == pytest.approx(0.125)
    assert report["max_abs_diff"] == pytest.approx(1.0)
    assert report["target_scale"] == pytest.approx(np.std(targets))
    assert report["relative_max_abs_diff"] == pytest.approx(1.0 / np.std(targets))
    rows = figure_rows({"task": "regression", **report})
    assert rows[0][0] == "val MAE" and "of the targets' std" in rows[1][3]

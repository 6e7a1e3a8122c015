"""training/keras_objects/code_checks.py: `tfaccel validate` checks own model, optimizer, loss and
metric callables and their params, and the params of Keras' own classes, as `train` does (same
message, exit 2), without importing them."""

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

import tfaccel
from tfaccel import python_refs
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)
# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python

ROOT = Path(__file__).resolve().parents[1]

# Every module imports keras at its top: importing one would load TensorFlow.
OWN_CODE = {
    "mymodel.py": '''
        import keras


        def build(*, input_shape, num_classes, width=8, **unused):
            inputs = keras.Input(input_shape)
            x = keras.layers.Dense(width, activation="relu")(inputs)
            return keras.Model(inputs, keras.layers.Dense(num_classes,
                                                          activation="softmax")(x))


        def build_strict(*, input_shape, num_classes, width, depth=1):
            return build(input_shape=input_shape, num_classes=num_classes, width=width)
        ''',
    "mylosses.py": '''
        import keras


        def focal(y_true, y_pred, gamma=2.0):
            ce = keras.losses.sparse_categorical_crossentropy(y_true, y_pred)
            return ce * (1.0 - keras.ops.exp(-ce)) ** gamma


        class Hits(keras.metrics.Mean):
            def __init__(self, name="hits", *, threshold=0.5):
                super().__init__(name=name)
                self.threshold = threshold
        ''',
    "myopt.py": '''
        import keras


        def make(learning_rate, *, nesterov=False):
            return keras.optimizers.SGD(learning_rate, momentum=0.9, nesterov=nesterov)
        ''',
}

# (overrides, the start of the message both commands give)
MISTAKES = [
    (["model.name=mymodel.py:biuld"],
     "model.name '{dir}/mymodel.py:biuld': module '{dir}/mymodel.py' has no attribute "
     "'biuld' (did you mean 'build'?)."),
    (["model.name=mymodel.py:build_strict", "model.params.widht=3"],
     "Unknown parameter 'widht' (did you mean 'width'?) for model.name "
     "'{dir}/mymodel.py:build_strict'. Known parameters: depth, width."),
    (["model.name=mymodel.py:build_strict"],
     "model.name '{dir}/mymodel.py:build_strict': the builder needs parameter 'width', which "
     "has no default: set it in model.params."),
    (["training.loss=mylosses.py:focal", "training.loss_params.gama=1"],
     "training.loss_params.gama: '{dir}/mylosses.py:focal' has no argument 'gama' (did you "
     "mean 'gamma'?); it takes gamma."),
    (["training.metrics=[mylosses.py:Hitz]"],
     "training.metrics[0] '{dir}/mylosses.py:Hitz': module '{dir}/mylosses.py' has no "
     "attribute 'Hitz' (did you mean 'Hits'?)."),
    (["training.metrics=[{name: mylosses.py:Hits, params: {treshold: 0.2}}]"],
     "training.metrics[0].params.treshold: '{dir}/mylosses.py:Hits' has no argument "
     "'treshold' (did you mean 'threshold'?); it takes name, threshold."),
    (["optimizer.name=myopt.py:make", "optimizer.params.nesterv=true"],
     "optimizer.params.nesterv: optimizer '{dir}/myopt.py:make' has no argument 'nesterv' "
     "(did you mean 'nesterov'?); it takes nesterov."),
    # Keras' own classes: validate reads their signatures from config/keras_signatures.py.
    (["optimizer.params.betta_1=0.8"],
     "optimizer.params.betta_1: Keras optimizer 'adam' (Adam) has no argument 'betta_1' (did "
     "you mean 'beta_1'?); it takes beta_1, beta_2, epsilon, amsgrad, clipvalue, "
     "global_clipnorm, use_ema, ema_momentum, ema_overwrite_frequency, loss_scale_factor, "
     "name."),
    (["optimizer.momentum=0.9"],
     "optimizer.momentum is 0.9 but Keras optimizer 'adam' (Adam) takes no momentum argument; "
     "leave optimizer.momentum out (its momentum is beta_1: set optimizer.params.beta_1)."),
    (["optimizer.schedule=ExponentialDecay", "optimizer.schedule_params.decay_steps=3"],
     "optimizer.schedule_params: Keras schedule ExponentialDecay needs decay_rate (got "
     "decay_steps)."),
    (["training.loss=sparse_categorical_crossentropy",
      "training.loss_params.label_smoothing=0.1"],
     "training.loss_params.label_smoothing: Keras loss 'sparse_categorical_crossentropy' "
     "(SparseCategoricalCrossentropy) has no argument 'label_smoothing'; it takes from_logits, "
     "ignore_class, reduction, axis, name, dtype."),
    (["training.metrics=[accuracy, {name: mae, params: {nme: m}}]"],
     "training.metrics[1].params.nme: Keras metric 'mae' (MeanAbsoluteError) has no argument "
     "'nme' (did you mean 'name'?); it takes name, dtype."),
]


@pytest.fixture
def project(tmp_path):
    for name, text in OWN_CODE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype("float32")
    np.savez(tmp_path / "blobs.npz", x_train=x, y_train=(x[:, 0] > 0).astype("int64"))
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({
        "data": {"source": "arrays", "path": "blobs.npz", "validation_split_name": None},
        "model": {"name": "mymodel.py:build"},
        "training": {"epochs": 1, "global_batch_size": 8},
        "runtime": {"precision": "float32", "tensorboard": False,
                    "runs_dir": str(tmp_path / "runs")}}))
    return tmp_path


VALIDATE = '''
import json, sys
from click.testing import CliRunner
from tfaccel.cli.main import main
args = json.loads(sys.argv[1])
result = CliRunner().invoke(main, ["validate", "tiny.yaml",
                                   *[a for o in args for a in ("--set", o)]])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras"))
print(json.dumps({"code": result.exit_code, "output": result.output, "heavy": heavy}))
'''


def _validate(project: Path, overrides) -> dict:
    # A fresh interpreter: the test process has TensorFlow loaded already.
    result = subprocess.run([sys.executable, "-c", VALIDATE, json.dumps(overrides)],
                            cwd=project, capture_output=True, text=True, timeout=120,
                            env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("overrides, message", MISTAKES,
                         ids=[m[0][-1].split("=")[0][:40] for m in MISTAKES])
def test_validate_refuses_what_train_refuses_with_the_same_message_and_no_tensorflow(
        project, monkeypatch, overrides, message):
    expected = message.format(dir=project)
    checked = _validate(project, overrides)
    assert checked["heavy"] == []
    assert checked["code"] == 2, checked["output"]
    assert checked["output"] == f"Error: {expected}\n"
    monkeypatch.chdir(project)
    with pytest.raises(UserInputError) as caught:
        tfaccel.train("tiny.yaml", overrides)
    assert str(caught.value) == expected
    assert not any((project / "runs").iterdir())


def test_validate_passes_own_code_that_fits_without_importing_it(project):
    checked = _validate(project, ["model.name=mymodel.py:build_strict",
                                  "model.params.width=3", "training.loss=mylosses.py:focal",
                                  "training.loss_params.gamma=1",
                                  "training.metrics=[{name: mylosses.py:Hits, "
                                  "params: {threshold: 0.2}}]", "optimizer.name=myopt.py:make"])
    assert checked["code"] == 0, checked["output"]
    assert checked["output"].startswith("tiny.yaml: OK (arrays data, model ")
    assert checked["heavy"] == []


def test_read_signature_reads_functions_and_classes_and_leaves_the_unplain_to_train(tmp_path):
    (tmp_path / "code.py").write_text(textwrap.dedent('''
        import functools
        from os import path as renamed

        def plain(a, /, b, *args, c, d=1, **kw): ...

        class WithInit:
            def __init__(self, x, *, y=2): ...

        class Inherited(dict): ...

        @functools.lru_cache
        def decorated(z): ...

        assigned = functools.partial(plain, 1)
        if True:
            def twice(): ...
        else:
            def twice(q): ...
        '''))
    read = python_refs.read_signature
    spec = str(tmp_path / "code.py")
    assert str(inspect.signature(read(f"{spec}:plain", key="k"))) == \
        "(a, /, b, *args, c, d=..., **kw)"
    with_init = read(f"{spec}:WithInit", key="k")
    assert inspect.isclass(with_init) and str(inspect.signature(with_init)) == "(x, *, y=...)"
    for name in ("Inherited", "decorated", "assigned", "twice", "renamed", "functools"):
        assert read(f"{spec}:{name}", key="k") is None, name
    with pytest.raises(UserInputError, match=r"has no attribute 'plane' \(did you mean "
                                             r"'plain'\?\)\.$"):
        read(f"{spec}:plane", key="k")
    with pytest.raises(TypeError, match="not called"):
        read(f"{spec}:plain", key="k")(1, 2, c=3)
    (tmp_path / "star.py").write_text("from os.path import *\n")
    assert read(f"{tmp_path / 'star.py'}:joinn", key="k") is None  # the star may define it

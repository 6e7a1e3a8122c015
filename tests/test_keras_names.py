"""Optimizers, schedules, losses and metrics by Keras' names (or module:callable), with
their arguments: the TF-free name tables, what each recipe builds, and every refusal; the
answers to the arguments of the Keras/tf.data functions the data builders replace."""

import inspect
import json
import textwrap

import keras
import numpy as np
import pytest
from click.testing import CliRunner
from tf_free import heavy_modules_after

from tfaccel.cli.main import main
from tfaccel.config import keras_names
from tfaccel.config.recipe import load_recipe, recipe_from_dict
from tfaccel.errors import RecipeError, UserInputError
from tfaccel.training.keras_objects.losses import make_loss, make_metrics
from tfaccel.training.keras_objects.optimizers import (
    check_optimizer,
    make_learning_rate,
    make_optimizer,
)

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

STEPS = {"total_steps": 100, "steps_per_epoch": 10}
USER_CODE = textwrap.dedent('''
    import keras

    def make_sgd(learning_rate, momentum=0.0, nesterov=False):
        return keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum,
                                    nesterov=nesterov)

    def halving(initial_learning_rate, every):
        return keras.optimizers.schedules.ExponentialDecay(
            initial_learning_rate, decay_steps=every, decay_rate=0.5, staircase=True)

    def scaled_crossentropy(y_true, y_pred, scale=1.0):
        return scale * keras.losses.sparse_categorical_crossentropy(y_true, y_pred)

    class Hits(keras.metrics.SparseTopKCategoricalAccuracy):
        def __init__(self, k=1, name="hits"):
            super().__init__(k=k, name=name)

    def averaged_adam(learning_rate):
        return keras.optimizers.Adam(learning_rate, use_ema=True)
''')


def recipe(optimizer=None, training=None, **sections):
    return recipe_from_dict({"optimizer": optimizer or {}, "training": training or {},
                             **sections})


def refusal(raw) -> str:
    with pytest.raises(RecipeError) as caught:
        recipe_from_dict(raw, source="r.yaml")
    return str(caught.value)


# ---------------------------------------------------------------------------------------
# The TF-free tables equal Keras' own names


def _classes(module, base):
    return {name: obj for name, obj in vars(module).items()
            if inspect.isclass(obj) and issubclass(obj, base) and obj is not base}


def test_the_optimizer_table_is_keras_optimizer_classes_and_get_knows_them():
    from keras.src.optimizers import ALL_OBJECTS_DICT  # what keras.optimizers.get takes

    wrappers = {"LossScaleOptimizer", "MultiOptimizer"}
    exported = {name.lower() for name in _classes(keras.optimizers,
                                                  keras.optimizers.Optimizer)} - {
        w.lower() for w in wrappers}
    assert set(keras_names.OPTIMIZERS) == exported
    # Keras' get knows them all but lamb (exported, unregistered in Keras 3.15).
    registry = set(ALL_OBJECTS_DICT) - {"optimizer", "optimizermap", "lossscaleoptimizer",
                                        "multioptimizer"}
    assert set(keras_names.OPTIMIZERS) - registry == {"lamb"}
    assert registry <= set(keras_names.OPTIMIZERS)


def test_the_schedule_table_is_keras_schedule_classes():
    schedules = keras.optimizers.schedules
    assert set(keras_names.KERAS_SCHEDULES) == set(
        _classes(schedules, schedules.LearningRateSchedule))


def test_the_loss_and_metric_tables_are_what_keras_get_takes():
    from keras.src.losses import ALL_OBJECTS_DICT as LOSSES
    from keras.src.metrics import ALL_OBJECTS_DICT as METRICS

    assert set(keras_names.LOSSES) == set(LOSSES) - {"Loss", "LossFunctionWrapper"}
    assert set(keras_names.METRICS) == set(METRICS) - {
        "Metric", "metric", "MeanMetricWrapper", "mean_metric_wrapper"}


def test_every_keras_optimizer_names_the_shortcut_arguments():
    # The check of optimizer.params is strict for Keras' classes (their **kwargs go to a
    # base class that takes only named arguments): each must name its base's arguments.
    from tfaccel.training.keras_objects.arguments import accepted_arguments
    from tfaccel.training.keras_objects.keras_classes import keras_class

    for name in keras_names.OPTIMIZERS:
        cls = keras_class(keras.optimizers, keras.optimizers.Optimizer, name)
        assert cls is not None, name
        names, _ = accepted_arguments(cls)
        assert {"learning_rate", "weight_decay", "clipnorm", "global_clipnorm"} <= set(names)
        assert isinstance(make_optimizer(recipe({"name": name}).optimizer, **STEPS), cls)


# ---------------------------------------------------------------------------------------
# What a recipe builds


def test_optimizer_by_keras_name_with_its_own_arguments():
    built = make_optimizer(recipe({"name": "nadam", "learning_rate": 0.01, "clipnorm": 2.0,
                                   "params": {"beta_1": 0.8, "epsilon": 1e-6}}).optimizer,
                           **STEPS)
    assert type(built) is keras.optimizers.Nadam
    assert built.beta_1 == 0.8 and built.epsilon == 1e-6 and built.clipnorm == 2.0
    assert float(built.learning_rate) == pytest.approx(0.01)


def test_shortcuts_map_where_they_apply_and_keep_keras_defaults_when_unset():
    sgd = make_optimizer(recipe({"name": "sgd", "momentum": 0.9,
                                 "params": {"nesterov": True}}).optimizer, **STEPS)
    assert type(sgd) is keras.optimizers.SGD and sgd.momentum == 0.9 and sgd.nesterov
    # momentum 0 (unset) leaves Muon's own 0.95; weight_decay empty leaves AdamW's 0.004,
    # and 0 is 0 (it was 0.004 before).
    assert make_optimizer(recipe({"name": "muon"}).optimizer, **STEPS).momentum == 0.95
    assert make_optimizer(recipe({"name": "adamw"}).optimizer, **STEPS).weight_decay == 0.004
    assert make_optimizer(recipe({"name": "adamw", "weight_decay": 0}).optimizer,
                          **STEPS).weight_decay == 0.0
    assert make_optimizer(recipe({"name": "lamb"}).optimizer, **STEPS).__class__.__name__ \
        == "Lamb"


def test_keras_schedule_starts_from_the_learning_rate():
    rate = make_learning_rate(recipe({"learning_rate": 0.1, "schedule": "ExponentialDecay",
                                      "schedule_params": {"decay_steps": 10,
                                                          "decay_rate": 0.5}}).optimizer,
                              **STEPS)
    assert isinstance(rate, keras.optimizers.schedules.ExponentialDecay)
    assert [float(rate(step)) for step in (0, 10, 20)] == pytest.approx([0.1, 0.05, 0.025])
    piecewise = make_learning_rate(recipe({
        "schedule": "PiecewiseConstantDecay",
        "schedule_params": {"boundaries": [5], "values": [0.1, 0.01]}}).optimizer, **STEPS)
    assert [float(piecewise(step)) for step in (0, 5, 6)] == pytest.approx([0.1, 0.1, 0.01])
    cosine = make_learning_rate(recipe({"learning_rate": 0.1, "schedule": "CosineDecay",
                                        "schedule_params": {"decay_steps": 100,
                                                            "warmup_steps": 10,
                                                            "warmup_target": 0.2}}).optimizer,
                                **STEPS)
    assert [float(cosine(step)) for step in (0, 10)] == pytest.approx([0.1, 0.2])


def test_tfaccel_cosine_schedule_is_unchanged():
    rate = make_learning_rate(recipe({"learning_rate": 0.1, "schedule": "cosine",
                                      "warmup_epochs": 1}).optimizer, **STEPS)
    assert [float(rate(step)) for step in (0, 5, 10, 55, 100)] == pytest.approx(
        [0.0, 0.05, 0.1, 0.05, 0.0], abs=1e-7)
    assert make_learning_rate(recipe().optimizer, **STEPS) == 0.001


def test_loss_with_arguments_is_the_keras_class():
    assert make_loss(recipe().training) == "sparse_categorical_crossentropy"  # as before
    loss = make_loss(recipe(training={"loss_params": {"from_logits": True}}).training)
    assert type(loss) is keras.losses.SparseCategoricalCrossentropy and loss.from_logits
    smoothed = make_loss(recipe(training={
        "loss": "categorical_crossentropy",
        "loss_params": {"from_logits": True, "label_smoothing": 0.1}}).training)
    assert type(smoothed) is keras.losses.CategoricalCrossentropy
    assert smoothed.from_logits and smoothed.label_smoothing == 0.1
    mse = make_loss(recipe(training={"loss": "mse", "loss_params": {"reduction": "sum"}}
                           ).training)
    assert type(mse) is keras.losses.MeanSquaredError and mse.reduction == "sum"


def test_metrics_with_arguments_keep_their_order():
    metrics = make_metrics(recipe(training={"metrics": [
        "accuracy", {"name": "SparseTopKCategoricalAccuracy", "params": {"k": 2}},
        {"name": "sparse_top_k_categorical_accuracy", "params": {"k": 3, "name": "top3"}},
        {"name": "auc"}]}).training)
    assert metrics[0] == "accuracy" and metrics[3] == "auc"
    assert type(metrics[1]) is keras.metrics.SparseTopKCategoricalAccuracy
    assert metrics[1].k == 2 and metrics[2].k == 3 and metrics[2].name == "top3"


def test_module_callables_from_a_file_beside_the_recipe_and_from_an_import_path(
        tmp_path, monkeypatch):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "mine.py").write_text(USER_CODE)
    (tmp_path / "recipes").mkdir()
    path = tmp_path / "recipes" / "r.yaml"
    path.write_text(textwrap.dedent("""
        optimizer:
          name: ../code/mine.py:make_sgd
          momentum: 0.5
          params: {nesterov: true}
          learning_rate: 0.4
          schedule: ../code/mine.py:halving
          schedule_params: {every: 2}
        training:
          loss: ../code/mine.py:scaled_crossentropy
          loss_params: {scale: 2.0}
          metrics: [{name: "../code/mine.py:Hits", params: {k: 2}}, mine:Hits]
    """))
    loaded = load_recipe(path)
    mine = (tmp_path / "code" / "mine.py").resolve()
    assert loaded.optimizer.name == f"{mine}:make_sgd"  # resolved against the recipe
    optimizer = make_optimizer(loaded.optimizer, **STEPS)
    assert type(optimizer) is keras.optimizers.SGD
    assert optimizer.momentum == 0.5 and optimizer.nesterov
    assert float(optimizer.learning_rate) == pytest.approx(0.4)
    assert float(optimizer._learning_rate(4)) == pytest.approx(0.1)
    loss = make_loss(loaded.training)
    y_true, y_pred = np.array([0]), np.array([[0.5, 0.5]])
    assert float(loss(y_true, y_pred)[0]) == pytest.approx(2 * np.log(2), rel=1e-5)
    assert loss.__name__ == "scaled_crossentropy"
    monkeypatch.syspath_prepend(str(tmp_path / "code"))  # the import path `mine:Hits`
    hits, plain = make_metrics(loaded.training)
    assert (hits.k, hits.name, plain.k) == (2, "hits", 1)


def test_an_optimizer_that_averages_its_weights_is_refused(tmp_path, monkeypatch):
    # Keras' use_ema swaps the average in after the last epoch's validation: the logged
    # figures would not describe the saved model (the recipe key is refused on loading).
    (tmp_path / "mine.py").write_text(USER_CODE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserInputError) as caught:
        make_optimizer(recipe({"name": "mine:averaged_adam"}).optimizer, **STEPS)
    message = str(caught.value)
    assert message.startswith("optimizer.name: 'mine:averaged_adam' returned an optimizer "
                              "with use_ema=True")
    assert "training.keep: last" in message


# ---------------------------------------------------------------------------------------
# Refusals: recipe loading (TF-free) and training start (signatures)


@pytest.mark.parametrize("raw, expected", [
    ({"optimizer": {"name": "adamm"}},
     "optimizer.name must be a Keras optimizer name or a module:callable, got 'adamm' "
     "(did you mean 'adam'?); one of: adadelta"),
    ({"optimizer": {"schedule": "exponential_decay"}},
     "got 'exponential_decay' (did you mean 'ExponentialDecay'?)"),
    ({"optimizer": {"params": {"learning_rate": 0.1}}},
     "optimizer.params.learning_rate sets what optimizer.learning_rate sets"),
    ({"optimizer": {"params": {"momentum": 0.9}}},
     "optimizer.params.momentum sets what optimizer.momentum sets"),
    ({"optimizer": {"params": {"gradient_accumulation_steps": 2}}},
     "optimizer.params.gradient_accumulation_steps: use training.accumulation_steps"),
    # Keras swaps the averaged weights in after the last epoch's validation: the logged
    # figures would not be the saved model's (keep: last) or the average would be dropped.
    ({"optimizer": {"params": {"use_ema": True, "ema_momentum": 0.99}}},
     "optimizer.params.use_ema is True, but Keras swaps the averaged weights in only after"),
    ({"optimizer": {"schedule": "cosine", "schedule_params": {"alpha": 0.1}}},
     "optimizer.schedule 'cosine' takes none (got alpha)"),
    ({"optimizer": {"warmup_epochs": 1}},
     "optimizer.warmup_epochs (1.0) warms up the cosine schedule only; optimizer.schedule "
     "is 'constant'"),
    ({"optimizer": {"schedule": "ExponentialDecay",
                    "schedule_params": {"initial_learning_rate": 0.1}}},
     "optimizer.schedule_params.initial_learning_rate sets what optimizer.learning_rate"),
    ({"optimizer": {"learning_rate": 0.1, "schedule": "PiecewiseConstantDecay"}},
     "optimizer.learning_rate (0.1) is not used by PiecewiseConstantDecay"),
    ({"training": {"loss": "sparse_crossentropy"}}, "training.loss must be a Keras loss name"),
    ({"training": {"loss": "crossentropy", "loss_params": {"from_logits": True}}},
     "training.loss_params: Keras picks the loss behind 'crossentropy'"),
    ({"training": {"metrics": ["acuracy"]}},
     "training.metrics[0] must be a Keras metric name or a module:callable, got 'acuracy' "
     "(did you mean 'accuracy'?)"),
    ({"training": {"metrics": [{"name": "auc", "param": {}}]}},
     "training.metrics[0] must be a metric name or a mapping {name: ..., params: {...}}, "
     "got {'name': 'auc', 'param': {}} (did you mean 'params'?)"),
    ({"training": {"metrics": [{"name": "auc", "params": [1]}]}},
     "training.metrics[0].params must be a mapping"),
    ({"training": {"metrics": [{"name": "accuracy", "params": {"k": 2}}]}},
     "training.metrics[0].params: Keras picks the metric behind 'accuracy'"),
])
def test_recipe_refusals_name_the_key_and_the_value(raw, expected):
    assert expected in refusal(raw)


@pytest.mark.parametrize("optimizer, training, expected", [
    ({"name": "nadam", "params": {"betta_1": 0.8}}, {},
     "optimizer.params.betta_1: Keras optimizer 'nadam' (Nadam) has no argument 'betta_1' "
     "(did you mean 'beta_1'?); it takes beta_1, beta_2, epsilon, clipvalue"),
    ({"name": "adam", "momentum": 0.9}, {},
     "optimizer.momentum is 0.9 but Keras optimizer 'adam' (Adam) takes no momentum "
     "argument; leave optimizer.momentum out (its momentum is beta_1"),
    ({"schedule": "ExponentialDecay", "schedule_params": {"decay_steps": 3}}, {},
     "optimizer.schedule_params: Keras schedule ExponentialDecay needs decay_rate"),
    ({"schedule": "PolynomialDecay", "schedule_params": {"decay_step": 3}}, {},
     "optimizer.schedule_params.decay_step: Keras schedule PolynomialDecay has no argument "
     "'decay_step' (did you mean 'decay_steps'?)"),
    ({}, {"loss": "sparse_categorical_crossentropy", "loss_params": {"label_smoothing": 0.1}},
     "training.loss_params.label_smoothing: Keras loss 'sparse_categorical_crossentropy' "
     "(SparseCategoricalCrossentropy) has no argument 'label_smoothing'"),
    ({}, {"metrics": ["accuracy", {"name": "sparse_top_k_categorical_accuracy",
                                   "params": {"kk": 2}}]},
     "training.metrics[1].params.kk: Keras metric 'sparse_top_k_categorical_accuracy' "
     "(SparseTopKCategoricalAccuracy) has no argument 'kk' (did you mean 'k'?)"),
    ({"name": "missing_module_xyz:make"}, {},
     "optimizer.name 'missing_module_xyz:make': the python module 'missing_module_xyz' cannot be found"),
])
def test_train_refuses_bad_arguments_before_building_data(tmp_path, monkeypatch, optimizer,
                                                          training, expected):
    from tfaccel.training.run.session import Session

    def no_data(self):
        raise AssertionError("the data was built before the arguments were checked")

    monkeypatch.setattr(Session, "build_data", no_data)
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps({"optimizer": optimizer, "training": training,
                                "runtime": {"runs_dir": str(tmp_path / "runs"),
                                            "precision": "float32"}}))
    result = CliRunner().invoke(main, ["train", str(path)])
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not list((tmp_path / "runs").glob("*"))  # no run directory left behind


def test_a_missing_callable_file_is_named(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("training:\n  loss: losses.py:mine\n")
    with pytest.raises(UserInputError, match=r"training.loss '.*losses.py:mine': the python source file '.*losses.py' does "
                       r"not exist"):
        make_loss(load_recipe(path).training)
    with pytest.raises(UserInputError, match="the python source file"):
        check_optimizer(recipe({"name": str(tmp_path / "no.py") + ":x"}).optimizer)


def test_validate_refuses_with_exit_2_and_stays_tensorflow_free(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("optimizer: {name: adam, params: {clipnorm: 1.0}}\n")
    result = CliRunner().invoke(main, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "optimizer.params.clipnorm sets what optimizer.clipnorm sets" in result.output
    # The modules are there (validate finds them and reads their callables' signatures)
    # but never run (it imports nothing).
    for module, body in (("my_pkg/__init__.py", ""),
                         ("my_pkg/losses.py", "def focal(y_true, y_pred, gamma=1.0): ...\n"),
                         ("code/metrics.py", "class Hits:\n    def __init__(self): ...\n")):
        (tmp_path / module).parent.mkdir(exist_ok=True)
        (tmp_path / module).write_text("raise RuntimeError('validate imported me')\n" + body)
    good = tmp_path / "good.yaml"
    good.write_text(textwrap.dedent("""
        optimizer: {name: nadam, params: {beta_1: 0.8}, schedule: ExponentialDecay,
                    schedule_params: {decay_steps: 10, decay_rate: 0.5}}
        training:
          loss: my_pkg.losses:focal
          loss_params: {gamma: 2.0}
          metrics: [accuracy, {name: sparse_top_k_categorical_accuracy, params: {k: 2}},
                    code/metrics.py:Hits]
    """))
    body = (f"r = CliRunner().invoke(main, ['validate', {str(good)!r}])\n"
            "assert r.exit_code == 0, r.output\n")
    assert heavy_modules_after(body) == []


# ---------------------------------------------------------------------------------------
# A short run


def test_a_run_with_a_keras_optimizer_schedule_loss_and_metric_with_arguments(
        tmp_path, shapes_data_dir):
    path = tmp_path / "r.yaml"
    path.write_text(textwrap.dedent(f"""
        data: {{source: builtin, data_dir: {shapes_data_dir}, train_split: "train[:64]",
               validation_split_name: "test[:32]", shuffle_buffer: 64}}
        optimizer: {{name: nadam, learning_rate: 3e-3, params: {{beta_1: 0.8}},
                    schedule: ExponentialDecay,
                    schedule_params: {{decay_steps: 4, decay_rate: 0.5}}}}
        training:
          epochs: 1
          global_batch_size: 32
          accumulation_steps: 2
          loss_params: {{ignore_class: null}}
          metrics: [accuracy, {{name: sparse_top_k_categorical_accuracy,
                                params: {{k: 2, name: top2}}}}]
        runtime: {{verbose: 0, tensorboard: false, precision: float32}}
    """))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", str(path), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in epochs] == [1]
    assert 0.0 <= epochs[0]["accuracy"] <= epochs[0]["top2"] <= 1.0
    assert 0.0 <= epochs[0]["val_accuracy"] <= epochs[0]["val_top2"] <= 1.0


@pytest.mark.parametrize("section, entry, key", [
    ("optimizer", "name: nope.py:make", "optimizer.name"),
    ("optimizer", "schedule: nope.py:make", "optimizer.schedule"),
    ("training", "loss: nope.py:mine", "training.loss"),
    ("training", "metrics: [accuracy, nope.py:hits]", "training.metrics[1]"),
    ("training", "metrics: [{name: nope.py:hits, params: {}}]", "training.metrics[0]"),
    ("training", "loss: no_such_module_xyz:mine", "training.loss"),
])
def test_validate_names_a_missing_callable_module_of_every_key(tmp_path, section, entry, key):
    # validate checks that a module:callable's file or module is there (found, never
    # imported: TF-free), as it does for data.path and model.name; these keys were left
    # to the first training step's check.
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"{section}: {{{entry}}}\n")
    result = CliRunner().invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"{key} " in text
    assert "does not exist" in text or "cannot be found" in text


# ---------------------------------------------------------------------------------------
# The arguments of the Keras/tf.data function a builder replaces: what tfaccel does instead

def _own_arguments(builder) -> set:
    return set(inspect.signature(builder).parameters)


def test_the_csv_hints_are_every_make_csv_dataset_argument_from_csv_does_not_take():
    import tensorflow as tf

    import tfaccel.data as tfd

    replaced, hints = keras_names.KERAS_ARGUMENT_HINTS["from_csv"]
    assert replaced == "tf.data.experimental.make_csv_dataset"
    theirs = set(inspect.signature(tf.data.experimental.make_csv_dataset).parameters)
    # file_pattern is from_csv's first argument, source (positional in both).
    assert set(hints) == theirs - _own_arguments(tfd.from_csv) - {"file_pattern"}


def test_the_loader_hints_are_keras_arguments_the_builders_do_not_take():
    import tfaccel.data as tfd

    for builder, function in ((tfd.from_image_folder, keras.utils.image_dataset_from_directory),
                              (tfd.from_timeseries, keras.utils.timeseries_dataset_from_array)):
        replaced, hints = keras_names.KERAS_ARGUMENT_HINTS[builder.__name__]
        assert replaced == f"keras.utils.{function.__name__}"
        theirs = set(inspect.signature(function).parameters)
        assert hints and set(hints) <= theirs - _own_arguments(builder)


CSV_HINTS = {
    "num_epochs": (1, "from_csv yields one pass over the rows per epoch, with a known "
                      "length, and Keras' fit repeats it: pass epochs= to fit"),
    "shuffle": (False, "shuffling is on by default (the files permuted once, seeded, then "
                       "the rows in a buffer); shuffle_buffer=0 reads files and rows in "
                       "order"),
    "shuffle_buffer_size": (10, "use shuffle_buffer= (rows; None: every row up to "
                                "100,000)"),
    "shuffle_seed": (7, "use seed= (it seeds the file order, the row shuffle and "
                        "augmentation)"),
    "prefetch_buffer_size": (2, "every tfaccel pipeline ends with prefetch(AUTOTUNE) "
                                "(tfaccel.data.optimize), so there is no size to set"),
    "num_parallel_reads": (4, "use cycle_length= (files read at once)"),
    "sloppy": (True, "use deterministic=False to let rows arrive out of order "
                     "(sloppy=True)"),
    "ignore_errors": (True, "from_csv skips no row: with verify=True (the default) a bad "
                            "row is named with its file, line and column; fix it, or give "
                            "column_defaults= for missing values"),
}


@pytest.mark.parametrize("name", sorted(CSV_HINTS))
def test_from_csv_answers_a_make_csv_dataset_argument_with_what_tfaccel_does(tmp_path, name):
    import tfaccel.data as tfd

    (tmp_path / "t.csv").write_text("a,b\n1,0\n2,1\n")
    value, hint = CSV_HINTS[name]
    with pytest.raises(UserInputError) as caught:
        tfd.from_csv(str(tmp_path / "t.csv"), batch_size=2, label_name="b", **{name: value})
    assert str(caught.value) == (f"from_csv() does not take tf.data.experimental."
                                 f"make_csv_dataset's {name}={value!r}: {hint}.")


def test_from_image_folder_answers_keras_data_format(tmp_path):
    import tfaccel.data as tfd

    with pytest.raises(UserInputError) as caught:
        tfd.from_image_folder(str(tmp_path), data_format="channels_first")
    assert str(caught.value) == (
        "from_image_folder() does not take keras.utils.image_dataset_from_directory's "
        "data_format='channels_first': from_image_folder yields channels_last images "
        "([batch, height, width, channels], Keras' default); leave data_format out, or "
        "transpose in the model (keras.layers.Permute((3, 1, 2))).")


def test_from_timeseries_answers_keras_format():
    import tfaccel.data as tfd

    with pytest.raises(UserInputError) as caught:
        tfd.from_timeseries(np.arange(10.0), None, 2, format="tf")
    assert str(caught.value) == (
        "from_timeseries() does not take keras.utils.timeseries_dataset_from_array's "
        "format='tf': from_timeseries builds a tf.data.Dataset (Keras' format='tf'); leave "
        "format out.")


def test_an_unknown_argument_still_gets_the_nearest_public_one(tmp_path):
    import tfaccel.data as tfd

    (tmp_path / "t.csv").write_text("a,b\n1,0\n2,1\n")
    with pytest.raises(UserInputError, match=r"unknown argument 'shufle_buffer' \(did you "
                                             r"mean 'shuffle_buffer'\?\)"):
        tfd.from_csv(str(tmp_path / "t.csv"), batch_size=2, shufle_buffer=4)

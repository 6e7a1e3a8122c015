"""`training.session.open_session`: a run (and a doctor run) puts the process state back."""

import random

import numpy as np
import pytest

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

SOURCE = (
    "import numpy as np\n"
    "num_classes = 2\n"
    "def source(worker, workers):\n"
    "    for i in range(worker, 64, workers):\n"
    "        x = np.float32([i % 2, 1 - i % 2]) * (np.nan if i == FAIL_AT else 1)\n"
    "        yield x, np.int64(i % 2)\n")


def _recipe(tmp_path, *, fail_at=-1, learning_rate=0.1):
    (tmp_path / "gen_source.py").write_text(f"FAIL_AT = {fail_at}\n" + SOURCE)
    recipe = tmp_path / "gen.yaml"
    # Every process-wide setting a run makes, each different from the process's own.
    recipe.write_text(
        "data: {source: python, path: gen_source.py:source, validation_split_name: null,\n"
        "       shuffle_buffer: 0, cache: null, workers: 1, num_classes: 2}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        f"optimizer: {{name: sgd, learning_rate: {learning_rate}}}\n"
        "training: {epochs: 1, global_batch_size: 16, steps_per_epoch: 4}\n"
        "runtime: {verbose: 0, tensorboard: false, precision: mixed_bfloat16,\n"
        "          deterministic: true, intra_op_threads: 1, inter_op_threads: 1}\n")
    return recipe


def _process_state():
    import keras

    from tfaccel.engine.determinism import op_determinism_enabled
    from tfaccel.engine.threads import thread_settings

    return {"policy": keras.mixed_precision.global_policy().name,
            "determinism": op_determinism_enabled(), "threads": thread_settings(),
            "python_random": random.getstate(), "numpy_random": np.random.get_state()[1].tolist()}


# TensorFlow fixes its thread pools for the whole process when its runtime starts; a run
# that started it keeps them (nothing can put them back). Each test starts it first, as a
# library user's process that already ran an op has: the run's 1-thread request then
# warns, and the settings seen before and after must be equal.
pytestmark = pytest.mark.filterwarnings("ignore:TensorFlow is already initialised with")


@pytest.fixture(autouse=True)
def tensorflow_started():
    import tensorflow as tf

    assert int(tf.constant(1) + 1) == 2


def test_a_run_puts_policy_determinism_threads_and_random_state_back(tmp_path):
    from tfaccel.training.run.runner import train

    before = _process_state()
    result = train(str(_recipe(tmp_path)), run_dir=str(tmp_path / "run"))
    assert result.summary["precision"] == "mixed_bfloat16"  # the run did set it
    assert result.summary["status"] == "completed"
    assert _process_state() == before
    assert before["policy"] == "float32" and before["determinism"] is False


def test_a_failing_run_puts_the_process_state_back_too(tmp_path):
    from tfaccel.errors import TrainingError
    from tfaccel.training.run.runner import train

    before = _process_state()
    with pytest.raises(TrainingError, match="the training loss became nan"):
        # A diverging step, not a NaN example: the source's NaN is now refused as bad data.
        train(str(_recipe(tmp_path, learning_rate=1e12)), run_dir=str(tmp_path / "run"))
    assert _process_state() == before


def test_the_session_sets_the_state_inside_and_restores_it_after_an_exception(tmp_path):
    import keras

    from tfaccel.config.recipe import load_recipe
    from tfaccel.engine.determinism import op_determinism_enabled
    from tfaccel.training.run.session import open_session

    recipe = load_recipe(_recipe(tmp_path))
    before = _process_state()
    with pytest.raises(RuntimeError, match="inside the session"):
        with open_session(recipe) as session:
            assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
            assert op_determinism_enabled()
            assert random.random() == random.Random(0).random()  # the recipe's seed 0
            assert (session.plan.global_batch_size, session.precision) == (16,
                                                                          "mixed_bfloat16")
            raise RuntimeError("inside the session")
    assert _process_state() == before


def test_doctor_opens_the_same_session_and_puts_the_state_back(tmp_path):
    from tfaccel.config.recipe import load_recipe
    from tfaccel.tools.doctor import diagnose

    recipe = load_recipe(_recipe(tmp_path))
    before = _process_state()
    report = diagnose(recipe, steps=2, repeats=1)
    assert report["settings"]["precision"] == "mixed_bfloat16"  # set for the measurements
    assert (report["settings"]["global_batch_size"], report["settings"]["replicas"]) == (16, 1)
    assert _process_state() == before

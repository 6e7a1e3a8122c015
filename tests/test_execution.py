"""Steps per execution through the runner: exact epochs, refused misfits, the auto choice."""

import json

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from tfaccel.cli.main import main
from tfaccel.config import batching
from tfaccel.errors import UserInputError
from tfaccel.training.model_setup import execution
from tfaccel.training.run import runner

# 64 examples, batch 32 and 5 steps per epoch: the data repeats inside an epoch, and 5 is
# a prime, so only 1 and 5 divide it.
FIVE_STEPS = {
    "seed": 0,
    "data": {"source": "builtin", "train_split": "train[:64]", "validation_split_name": "test[:32]",
             "shuffle_buffer": 64},
    "model": {"name": "small_cnn", "params": {"filters": [4], "dense_units": 0}},
    "optimizer": {"name": "sgd", "learning_rate": 0.01},
    "training": {"epochs": 2, "global_batch_size": 32, "steps_per_epoch": 5},
    "runtime": {"verbose": 0, "tensorboard": False, "precision": "float32"},
}


def _recipe(data_dir, **training):
    recipe = json.loads(json.dumps(FIVE_STEPS))
    recipe["data"]["data_dir"] = data_dir
    recipe["training"].update(training)
    return recipe


class TraceCounter(keras.callbacks.Callback):
    """Counts the traces of the model's train step: its Python body runs only then.

    The first call traces it twice in plain Keras too (the first trace creates variables,
    tf.function traces again without), so retraces are the ones after the first epoch.
    """

    def __init__(self):
        super().__init__()
        self.traces = 0
        self.after_first_epoch = None
        self._wrapped = set()

    def on_epoch_end(self, epoch, logs=None):
        if self.after_first_epoch is None:
            self.after_first_epoch = self.traces

    def set_model(self, model):
        super().set_model(model)
        if id(model) in self._wrapped:  # every `fit` call sets the model again
            return
        self._wrapped.add(id(model))
        step = model.train_step

        def counted(data):
            self.traces += 1
            return step(data)

        model.train_step = counted


def _iterations(result) -> int:
    model = keras.saving.load_model(result.run_dir / "model.keras")
    return int(model.optimizer.iterations.numpy())


def test_steps_per_execution_that_does_not_divide_an_epoch_is_refused(tmp_path,
                                                                      shapes_data_dir):
    # Keras runs whole calls of steps_per_execution steps on an endless stream: 2 per call
    # over a 5-step epoch trained 6 steps per epoch, silently, and every epoch boundary,
    # resume point and example count after it was off.
    with pytest.raises(UserInputError) as raised:
        runner.train(_recipe(shapes_data_dir, steps_per_execution=2),
                     run_dir=str(tmp_path / "misfit"))
    message = str(raised.value)
    assert "training.steps_per_execution 2" in message and "5 steps" in message
    assert "1 or 5" in message and "auto" in message


def test_the_cli_refuses_a_misfit_with_exit_2_and_no_traceback(tmp_path, shapes_data_dir):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps(_recipe(shapes_data_dir, steps_per_execution=3)))
    result = CliRunner().invoke(main, ["train", str(recipe), "--run-dir",
                                       str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "training.steps_per_execution 3" in result.output
    assert "Traceback" not in result.output


def test_a_divisor_trains_exactly_the_steps_of_each_epoch(tmp_path, shapes_data_dir):
    result = runner.train(_recipe(shapes_data_dir, steps_per_execution=5),
                          run_dir=str(tmp_path / "five"))
    assert _iterations(result) == 10
    assert [e["examples"] for e in result.epochs] == [160, 160]
    assert result.summary["steps_per_execution"] == 5


def test_checkpoints_every_n_steps_must_fall_on_call_boundaries():
    with pytest.raises(UserInputError, match=r"checkpoint_every_steps 3 .*steps_per_execution 2"):
        batching.check_steps_per_execution(2, steps_per_epoch=4, every_steps=3)
    batching.check_steps_per_execution(2, steps_per_epoch=4, every_steps=6)


@pytest.mark.parametrize("overhead_ms, step_ms, steps, every, expected", [
    (0.05, 10.0, 100, None, 1),    # 0.5% overhead: one step per call is fine
    (0.5, 5.0, 100, None, 5),      # 10%: 5 steps a call bring it to 2%
    (0.5, 5.0, 75, None, 5),       # the smallest divisor of 75 at or above 5
    (0.5, 5.0, 7, None, 7),        # a prime epoch: all of it in one call
    (0.5, 5.0, 97, None, 1),       # 97 has no divisor between 2 and 32: stay at 1
    (2.0, 1.0, 1000, None, 25),    # the target needs 100; the cap (32) takes the largest
                                   # divisor below it
    (0.5, 5.0, 100, 4, 4),         # every 4 steps a checkpoint: calls of 4 at most
    (0.5, 400.0, 100, None, 1),    # slow steps: nothing to gain
    (50.0, 400.0, 100, None, 2),   # calls stay under a second (2 x 400 ms)
    (0.5, 0.0, 64, None, 32),      # a step the timer cannot see: the most steps per call
])
def test_auto_takes_the_smallest_fitting_divisor(overhead_ms, step_ms, steps, every, expected):
    choice = execution.choose_steps_per_execution(
        overhead_seconds=overhead_ms / 1e3, step_seconds=step_ms / 1e3,
        steps_per_epoch=steps, every_steps=every)
    assert choice.steps == expected
    batching.check_steps_per_execution(choice.steps, steps_per_epoch=steps, every_steps=every)


def test_auto_measures_the_first_epoch_then_trains_the_same_steps(tmp_path, shapes_data_dir,
                                                                 monkeypatch):
    # The choice depends on the machine's timings: see what it was given, force 5, and
    # force the switch the short run would not repay.
    measured, weighed = {}, {}

    def choose(**kwargs):
        measured.update(kwargs)
        return execution.Choice(steps=5, reason="forced by the test")

    def weigh(choice, **kwargs):
        weighed.update(kwargs)
        return choice

    monkeypatch.setattr(execution, "choose_steps_per_execution", choose)
    monkeypatch.setattr(execution, "weigh_retrace", weigh)
    counter = TraceCounter()
    result = runner.train(_recipe(shapes_data_dir, steps_per_execution="auto", epochs=3),
                          run_dir=str(tmp_path / "auto"), callbacks=[counter])
    assert _iterations(result) == 15
    # The switch retraced the train step for epochs 2-3.
    assert counter.after_first_epoch >= 1 and counter.traces > counter.after_first_epoch
    # Weighed against the 10 steps left, and what the first calls spent tracing.
    assert weighed["remaining_steps"] == 10 and weighed["retrace_seconds"] > 0
    assert [e["examples"] for e in result.epochs] == [160, 160, 160]
    # Measured on the first epoch's calls: a per-call cost and a step's compute, in seconds.
    assert measured["steps_per_epoch"] == 5 and 0 < measured["step_seconds"] < 1
    assert 0 <= measured["overhead_seconds"] < 1
    assert result.summary["steps_per_execution"] == 5
    assert result.summary["steps_per_execution_choice"]["reason"] == "forced by the test"


@pytest.mark.parametrize("overhead_ms, remaining, retrace_s, expected", [
    (1.0, 225, 1.0, 1),      # 4 epochs of 75 steps: 0.22 s saved < a 1 s retrace: keep 1
    (1.0, 22_500, 1.0, 25),  # 300 more epochs: 21.6 s saved, switch
    (5.0, 225, 1.0, 25),     # a dear call: 1.08 s saved repays a 1 s retrace
])
def test_auto_switches_only_when_the_rest_of_the_run_repays_the_retrace(
        overhead_ms, remaining, retrace_s, expected):
    choice = execution.choose_from_cost(
        {"overhead_seconds": overhead_ms / 1e3, "step_seconds": 1e-3}, steps_per_epoch=75,
        unmeasured="-", remaining_steps=remaining, retrace_seconds=retrace_s)
    assert choice.steps == expected
    assert choice.saving_seconds == pytest.approx(overhead_ms / 1e3 * remaining * 24 / 25,
                                                  rel=1e-3)
    assert choice.retrace_seconds == retrace_s
    if expected == 1:
        assert "less than retracing" in choice.reason and "traced once" in choice.reason
    # Without the rest of the run (tfaccel doctor's question), the measured cost decides.
    assert execution.choose_from_cost(
        {"overhead_seconds": overhead_ms / 1e3, "step_seconds": 1e-3}, steps_per_epoch=75,
        unmeasured="-").steps == 25


def test_a_short_run_traces_the_train_step_once(tmp_path, shapes_data_dir, monkeypatch):
    from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor

    # The measured cost asks for 5 steps per call (0.5 ms a call, 10% of a 5 ms step), but
    # 10 remaining steps save 4 ms: less than any retrace.
    monkeypatch.setattr(ThroughputMonitor, "per_call_cost", lambda self, **_: {
        "overhead_seconds": 5e-4, "step_seconds": 5e-3, "calls": 4})
    counter = TraceCounter()
    result = runner.train(_recipe(shapes_data_dir, steps_per_execution="auto", epochs=3),
                          run_dir=str(tmp_path / "short"), callbacks=[counter])
    # No trace after the first epoch's (the train function of epoch 1 trains them all).
    assert counter.after_first_epoch >= 1 and counter.traces == counter.after_first_epoch
    assert result.summary["steps_per_execution"] == 1
    choice = result.summary["steps_per_execution_choice"]
    assert choice["saving_seconds"] == pytest.approx(5e-4 * 10 * 4 / 5)
    assert choice["retrace_seconds"] > choice["saving_seconds"]
    assert "traced once" in choice["reason"]
    assert _iterations(result) == 15
    assert [e["examples"] for e in result.epochs] == [160, 160, 160]


def test_the_switch_keeps_the_weights_of_one_step_per_call(tmp_path, shapes_data_dir,
                                                          monkeypatch):
    from tfaccel.training.fit_callbacks.throughput import ThroughputMonitor

    # Op determinism (bit-equal runs) refuses the in-graph timer, so the measurement is
    # given: 0.5 ms a call on a 5 ms step makes the real choice 5 steps per call.
    monkeypatch.setattr(ThroughputMonitor, "attach", lambda self, model, **_: None)
    monkeypatch.setattr(ThroughputMonitor, "per_call_cost", lambda self, **_: {
        "overhead_seconds": 5e-4, "step_seconds": 5e-3, "calls": 4})
    runs = {}
    for steps in ("auto", 1):
        recipe = _recipe(shapes_data_dir, steps_per_execution=steps, epochs=3)
        recipe["runtime"]["deterministic"] = True
        runs[steps] = runner.train(recipe, run_dir=str(tmp_path / str(steps)))
    assert runs["auto"].summary["steps_per_execution"] == 5
    assert runs["auto"].summary["steps_per_execution_choice"]["overhead_ms"] == 0.5
    assert _iterations(runs["auto"]) == _iterations(runs[1]) == 15
    # The same steps on the same batches in the same order: the same weights, bit for bit.
    auto = keras.saving.load_model(runs["auto"].run_dir / "model.keras").get_weights()
    plain = keras.saving.load_model(runs[1].run_dir / "model.keras").get_weights()
    for a, b in zip(auto, plain):
        np.testing.assert_array_equal(a, b)


def test_auto_stays_at_one_step_per_call_where_it_cannot_measure(tmp_path, shapes_data_dir,
                                                                 capsys):
    recipe = _recipe(shapes_data_dir, steps_per_execution="auto")
    recipe["runtime"]["deterministic"] = True  # TensorFlow refuses the step timer then
    result = runner.train(recipe, run_dir=str(tmp_path / "det"))
    assert result.summary["steps_per_execution"] == 1
    assert "runtime.deterministic" in result.summary["steps_per_execution_choice"]["reason"]
    assert "steps_per_execution auto: 1 (per-call cost unmeasured" in capsys.readouterr().out
    assert _iterations(result) == 10

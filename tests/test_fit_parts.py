"""`training.run.fit_parts`: what the runner's `fit` calls cost and do (one trace off a strategy)."""

import json

import numpy as np

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_a_one_device_run_traces_its_train_step_once(tmp_path, monkeypatch):
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    from tfaccel.training.run.runner import train

    traces = []
    original = TensorFlowTrainer.train_step
    monkeypatch.setattr(TensorFlowTrainer, "train_step",
                        lambda self, data: traces.append(1) or original(self, data))
    x = np.float32([[i % 2, 1 - i % 2] for i in range(64)])
    np.savez(tmp_path / "d.npz", x_train=x, y_train=np.arange(64) % 2)
    recipe = tmp_path / "arrays.yaml"
    recipe.write_text(
        f"data: {{source: arrays, path: {tmp_path / 'd.npz'}}}\n"
        "model: {name: mlp, params: {normalization: none}}\n"
        "optimizer: {name: adam, learning_rate: 0.01}\n"
        "training: {epochs: 2, global_batch_size: 16, steps_per_epoch: 4,\n"
        "           steps_per_execution: 1, keep: last}\n"
        f"runtime: {{verbose: 0, tensorboard: false, runs_dir: {tmp_path / 'runs'}}}\n")
    result = train(str(recipe), run_dir=str(tmp_path / "run"))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["epochs_completed"] == 2
    # Keras 3.15 alone creates Adam's slots and the metrics' sums inside the first trace,
    # which TensorFlow then traces again: 2 (keras_compat.build_before_fit).
    assert len(traces) == 1
    assert result.run_dir == tmp_path / "run"

"""What a checkpoint must hold beyond Keras' weights file, and putting it back."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from tfaccel.errors import TrainingError
from tfaccel.training.run_dir.checkpoints import EXTRA_FILE, WEIGHTS_FILE, Checkpoint


def global_step(model) -> int:
    """THE global step of a run: the optimizer's step counter (`optimizer.iterations`).

    As Orbit does: one count per `train_step` (tfaccel's accumulation applies once per
    step, and a loss-scaled step that skips its update still counts), saved and restored with
    the optimizer, so after a resume it goes on counting the whole run. A checkpoint's epoch
    and step in the epoch are derived from it (`divmod` by the steps per epoch).
    """
    return int(model.optimizer.iterations.numpy())


def _seed_states(model) -> list:
    # Keras' weights file leaves out the SeedGenerator states (Dropout and other random
    # layers): without them a resumed run would draw other dropout masks.
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _metric_variables(model) -> list:
    return [v for metric in model.metrics for v in metric.variables]


def write_state_files(model, folder: Path, *, with_metrics: bool,
                      best_weights: Optional[list] = None) -> None:
    """Writes the model's and optimizer's state into `folder` (a checkpoint in the making).

    Args:
        model: The compiled Keras model being trained (an accumulation wrapper included).
        folder: Where to write `WEIGHTS_FILE` (Keras' format: weights and optimizer state,
            loss-scale state under mixed_float16 included) and `EXTRA_FILE`.
        with_metrics: Also save the running sums of the epoch's metrics (a checkpoint in
            the middle of an epoch, so the resumed epoch reports the same mean).
        best_weights: The best epoch's weights (`BestEpoch`), kept to restore them at the end.
    """
    model.save_weights(str(folder / WEIGHTS_FILE))
    extra = {}
    for i, variable in enumerate(_seed_states(model)):
        extra[f"seed/{i}"] = np.asarray(variable.numpy())
    if with_metrics:
        for i, variable in enumerate(_metric_variables(model)):
            extra[f"metric/{i}"] = np.asarray(variable.numpy())
    for i, weight in enumerate(best_weights or []):
        extra[f"best/{i}"] = np.asarray(weight)
    with (folder / EXTRA_FILE).open("wb") as stream:
        np.savez(stream, **extra)


def _indexed(extra, prefix: str) -> list:
    keys = sorted((k for k in extra.files if k.startswith(prefix + "/")),
                  key=lambda k: int(k.split("/", 1)[1]))
    return [extra[k] for k in keys]


def restore_state(model, checkpoint: Checkpoint) -> dict:
    """Loads a checkpoint into a freshly built and compiled model.

    The optimizer's variables are created first (Keras creates them lazily at the first
    step), so that the weights file's optimizer state has somewhere to go.

    Returns:
        ``{"metrics": [arrays] or [], "best_weights": [arrays] or None}``: the metric sums
        to put back when the interrupted epoch starts again, and the best epoch's weights.
    """
    optimizer = model.optimizer
    if not optimizer.built:
        optimizer.build(model.trainable_variables)
    model.load_weights(str(checkpoint.path / WEIGHTS_FILE))
    with np.load(checkpoint.path / EXTRA_FILE) as extra:
        seeds = _indexed(extra, "seed")
        metrics = _indexed(extra, "metric")
        best = _indexed(extra, "best")
    for variable, value in zip(_seed_states(model), seeds):
        variable.assign(value)
    return {"metrics": metrics, "best_weights": best or None}


def add_metric_state(model, values: list) -> None:
    """Adds an interrupted epoch's saved metric sums to the running ones.

    Called after the resumed epoch's first step (Keras builds its compiled metrics in the
    first step, and resets all metrics at the start of each epoch). Every Keras metric keeps
    sums (totals and counts, confusion-matrix cells), so the epoch's result equals that of
    an uninterrupted epoch.
    """
    variables = _metric_variables(model)
    if len(variables) != len(values):
        raise TrainingError(
            f"the checkpoint holds {len(values)} metric values but the model has "
            f"{len(variables)} metric variables; the interrupted epoch's metrics cannot be "
            "continued (was the recipe's training.metrics changed?).")
    for variable, value in zip(variables, values):
        variable.assign_add(value)

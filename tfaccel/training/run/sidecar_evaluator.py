"""An `evaluator` task of a TF_CONFIG cluster: evaluates the chief's checkpoints as they appear.

Side-car evaluation as TensorFlow and Keras document it (`tf.keras.utils.SidecarEvaluator`):
the evaluator is no training task of the cluster (it takes part in no collective); it reads
the checkpoints the chief writes into its run directory on a filesystem both share,
evaluates each newest one on the recipe's validation split, writes its own metrics and
stops once the chief's run has ended (its summary.json written), every checkpoint up to
then evaluated. Checkpoints that appear while one is evaluated are skipped for the newest
one, as Keras' evaluator does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from tfaccel.config.recipe import Recipe, load_recipe, recipe_from_dict, recipe_to_dict
from tfaccel.engine.layer_sharding import copyable, shard_layers, unshard_layers
from tfaccel.errors import UserInputError
from tfaccel.messages import say
from tfaccel.training.model_setup.model_build import build_model
from tfaccel.training.run.session import open_session
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir import run_files
from tfaccel.training.run_dir.training_state import restore_state

EVALUATION_DIR = "evaluation"  # inside the chief's run directory: the evaluator's files
# A resumed chief keeps the interrupted run's summary.json until it ends: a summary of
# these says the run may go on; a completed one that was there before the evaluator
# started says it is over.
_MAY_CONTINUE = ("preempted", "interrupted", "failed")


@dataclasses.dataclass(frozen=True)
class EvaluationResult:
    """What an evaluator leaves: one record per evaluated checkpoint, in the chief's run
    directory's `evaluation/metrics.jsonl`."""

    run_dir: Path
    records: List[dict]

    @property
    def metrics_file(self) -> Path:
        """Where the records are."""
        return self.run_dir / EVALUATION_DIR / run_files.METRICS_FILE

    def summary_text(self) -> str:
        """The evaluator's closing lines, naming the chief's run directory."""
        if not self.records:
            head = "Evaluator: the chief's run ended before any checkpoint appeared."
        else:
            last = self.records[-1]
            figures = ", ".join(f"{k} {v:.4f}" for k, v in last.items()
                                if k.startswith("val_") and isinstance(v, (int, float)))
            head = (f"Evaluator done: {len(self.records)} checkpoint(s) evaluated, the last "
                    f"{last['checkpoint']} (step {last['global_step']}): {figures}; in "
                    f"{self.metrics_file}.")
        return head + f"\nThe chief wrote the run directory: {self.run_dir}"


def evaluate_alongside(recipe_or_path, overrides: Sequence[str] = (), *,
                       run_dir, model=None, poll_seconds: float = 2.0) -> EvaluationResult:
    """Evaluates the chief's checkpoints in `run_dir` until the chief's run ends.

    Args:
        recipe_or_path: The job's recipe (a path, mapping or `Recipe`), or None to read the
            chief's recipe.yaml once it is there.
        overrides: ``key=value`` overrides, as for `train`.
        run_dir: The chief's run directory (its ``--run-dir``, on a shared filesystem).
        model: Your own model or builder, as the chief was given it (`train(model=...)`).
        poll_seconds: How often the directory is looked at.

    Returns:
        The `EvaluationResult`.

    Raises:
        UserInputError: No run directory, or a recipe without a validation split.
    """
    if run_dir is None:
        raise UserInputError(
            "this process is TF_CONFIG's evaluator task: it evaluates the checkpoints the "
            "chief writes, so it needs the chief's run directory: give --run-dir DIR (the "
            "chief's --run-dir, on a filesystem both see).")
    directory = Path(run_dir)
    recipe = _recipe(recipe_or_path, overrides, directory=directory, poll_seconds=poll_seconds,
                     own_model=model is not None)
    if recipe.runtime.strategy in ("multi_worker", "parameter_server"):
        # The cluster's strategy; the evaluator is no task of it and trains nothing.
        recipe = dataclasses.replace(
            recipe, runtime=dataclasses.replace(recipe.runtime, strategy="auto"))
    say(f"evaluator: evaluating the chief's checkpoints in {directory} as they appear.")
    with _outside_the_cluster():
        return _evaluate_until_done(recipe, directory=directory, model=model,
                                    poll_seconds=poll_seconds)


def _evaluate_until_done(recipe: Recipe, *, directory: Path, model,
                         poll_seconds: float) -> EvaluationResult:

    summary_at_start = _summary_state(directory)
    # The session waits for the first checkpoint: by then the chief has recorded the
    # policy `precision: auto` chose (precision.json), which the evaluator takes too.
    while not ckpt.list_checkpoints(directory / run_files.CHECKPOINTS_DIR):
        if _has_ended(directory, summary_at_start):
            return EvaluationResult(run_dir=directory, records=[])
        time.sleep(poll_seconds)
    with open_session(recipe, precision=run_files.recorded_precision(directory)) as session:
        data = session.build_data()
        if data.validation is None:
            raise UserInputError(
                "the evaluator task evaluates on the validation split, and this recipe has "
                f"none (data.validation_split {recipe.data.validation_split!r}); give the "
                "recipe a validation split, or run the job without an evaluator.")
        trained_model, plain = build_model(recipe, strategy=session.strategy,
                                           plan=session.plan, data=data, given=model)
        records, seen = [], set()
        while True:
            ended = _has_ended(directory, summary_at_start)
            checkpoint, _ = ckpt.latest_checkpoint(directory / run_files.CHECKPOINTS_DIR)
            if checkpoint is not None and checkpoint.path.name not in seen:
                seen.add(checkpoint.path.name)
                try:
                    with session.strategy.scope():
                        if ckpt.VARIABLES_FILE in checkpoint.state.get("files", {}):
                            restore_parameter_server_weights(
                                plain, checkpoint,
                                min_shard_bytes=recipe.runtime.min_shard_bytes)
                        else:
                            restore_state(trained_model, checkpoint)
                except (OSError, ValueError) as error:  # pruned while it was read
                    say(f"evaluator: checkpoint {checkpoint.path.name} is skipped: {error}.")
                    continue
                records.append(_evaluate(trained_model, checkpoint, data=data,
                                         steps=recipe.training.validation_steps,
                                         directory=directory))
                continue
            if ended:
                return EvaluationResult(run_dir=directory, records=records)
            time.sleep(poll_seconds)


def restore_parameter_server_weights(model, checkpoint: ckpt.Checkpoint, *,
                                     min_shard_bytes: Optional[int]) -> None:
    """Puts a parameter-server checkpoint's model weights into `model` (built here).

    The chief saved every variable of its model, then of its optimizer, in order
    (`VARIABLES_FILE`); its large Embeddings and Dense kernels were sharded
    (`ShardedEmbedding`, `ShardedDense`) by runtime.min_shard_bytes over the parameter
    servers the checkpoint records. The same sharded copy is made here (on this machine's
    device), given the saved values, and its whole tables and kernels put into `model`. The optimizer's values are not needed to evaluate.

    Raises:
        UserInputError: The checkpoint's variables do not fit the model (another recipe).
    """

    servers = int(checkpoint.state.get("parameter_servers") or 1)
    target = model
    if min_shard_bytes is not None and copyable(model):
        target = shard_layers(model, min_shard_bytes=min_shard_bytes, max_shards=servers)
    path = checkpoint.path / ckpt.VARIABLES_FILE
    with np.load(path) as saved:
        variables = list(target.variables)
        if len(saved.files) < len(variables):
            raise UserInputError(
                f"{path} holds {len(saved.files)} variables, fewer than the "
                f"{len(variables)} of the recipe's model: it is not this recipe's checkpoint.")
        for i, variable in enumerate(variables):
            value = saved[f"v{i}"]
            if tuple(value.shape) != tuple(variable.shape):
                raise UserInputError(
                    f"{path}'s variable {i} has shape {tuple(value.shape)} but the recipe's "
                    f"model's {variable.path} has {tuple(variable.shape)}: it is not this "
                    "recipe's checkpoint.")
            variable.assign(value)
    if target is not model:  # the whole tables and kernels back into the model evaluated
        for old, new in zip(model.variables, unshard_layers(target).variables,
                            strict=True):
            old.assign(new.numpy())


def _evaluate(trained_model, checkpoint: ckpt.Checkpoint, *, data, steps,
              directory: Path) -> dict:
    """One checkpoint on the validation split: its record, written and said."""
    results = trained_model.evaluate(data.validation, steps=steps, return_dict=True,
                                     verbose=0)
    record = {"checkpoint": checkpoint.path.name, "epoch": checkpoint.epoch,
              "step_in_epoch": checkpoint.step_in_epoch,
              "global_step": checkpoint.global_step,
              **{f"val_{k}": float(v) for k, v in results.items()}, "time": time.time()}
    folder = directory / EVALUATION_DIR
    folder.mkdir(exist_ok=True)
    run_files.append_jsonl(folder / run_files.METRICS_FILE, record)
    figures = ", ".join(f"{k} {v:.4f}" for k, v in record.items() if k.startswith("val_"))
    say(f"evaluator: {checkpoint.path.name} (step {checkpoint.global_step}): {figures}.")
    return record


def _summary_state(directory: Path) -> Optional[tuple]:
    """(mtime, size, status) of the chief's summary.json, or None when there is none."""
    path = directory / run_files.SUMMARY_FILE
    try:
        stat = path.stat()
        status = json.loads(path.read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError, AttributeError):
        return None
    return stat.st_mtime_ns, stat.st_size, status


def _has_ended(directory: Path, at_start: Optional[tuple]) -> bool:
    """Whether the chief's run is over: a summary.json written since the evaluator
    started, or a completed one that was already there."""
    now = _summary_state(directory)
    if now is None:
        return False
    if now != at_start:
        return True
    return now[2] not in _MAY_CONTINUE


def _recipe(recipe_or_path, overrides, *, directory: Path, poll_seconds: float,
            own_model: bool) -> Recipe:
    """The job's recipe: given, or the chief's recipe.yaml once the chief has written it."""
    if isinstance(recipe_or_path, Recipe):
        return recipe_or_path if not overrides else recipe_from_dict(
            recipe_to_dict(recipe_or_path), overrides=overrides, own_model=own_model)
    if isinstance(recipe_or_path, dict):
        return recipe_from_dict(recipe_or_path, overrides=overrides, own_model=own_model)
    if recipe_or_path is not None:
        return load_recipe(recipe_or_path, overrides, own_model=own_model)
    saved = directory / run_files.RECIPE_FILE
    while not saved.is_file():
        time.sleep(poll_seconds)
    return load_recipe(saved, overrides, own_model=own_model)


@contextlib.contextmanager
def _outside_the_cluster():
    """Without TF_CONFIG while the evaluator works: it trains in no cluster, so its
    strategy is this machine's own (`auto`: one device, or its GPUs mirrored)."""
    saved = os.environ.pop("TF_CONFIG", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TF_CONFIG"] = saved

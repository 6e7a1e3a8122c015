"""Opening a run: the recipe (new or resumed), this worker's role, the run directory and its
lock, and removing a new run directory that training never started in."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from tfaccel.config.cluster import (
    WorkerRole,
    check_strategy_for_cluster,
    cluster_task,
    tf_config_tasks,
    training_addresses,
    worker_role,
)
from tfaccel.config.recipe import (
    Recipe,
    dump_recipe,
    load_recipe,
    recipe_from_dict,
    recipe_to_dict,
)
from tfaccel.engine.cluster_join import ClusterJoin
from tfaccel.errors import UserInputError
from tfaccel.training.distributed.stuck_signals import signals_end_the_wait
from tfaccel.training.run_dir import data_source, model_source, run_files
from tfaccel.training.run_dir.resume import LOCK_FILE, RunLock, plan_resume


@dataclasses.dataclass(frozen=True)
class OpenedRun:
    """The first step of `train`: the recipe, this worker's role and where it writes."""

    recipe: Recipe
    role: WorkerRole
    directory: Path  # where this process writes: the run directory or a worker's scratch
    shown: Optional[Path]  # the run directory as the user knows it (the chief's)
    lock: Optional[RunLock]
    scratch: Optional[Path]  # a non-chief worker's scratch folder, removed at the end
    model_source: dict  # what model the run trains (model_source.describe)


def open_run(recipe_or_path, overrides: Sequence[str], *, run_dir: Optional[str],
             resume, model=None) -> OpenedRun:
    """Resolves the recipe (new or resumed), takes the run directory's lock, writes recipe.yaml."""
    # In a multi-worker run only the chief writes the run directory; every other worker
    # runs the same code (saving is a collective there) into a scratch folder removed at
    # the end, and reads checkpoints from the run directory when resuming.
    lock = scratch = None
    run_files.check_resume_target(run_dir=run_dir, resume=resume)
    if resume is not None:
        model_source.prepare_resume(resume)
        requested = None if recipe_or_path is None else _as_recipe(
            recipe_or_path, overrides, own_model=model is not None)
        request = plan_resume(resume, requested=requested,
                              overrides=overrides if requested is None else (),
                              own_model=model is not None)
        recipe, directory = request.recipe, request.directory
        source = model_source.describe(recipe, given=model)
        model_source.check_same(directory, source)
        role = _checked_role(recipe)
        shown = directory
        if role.chief:
            lock = RunLock(directory).acquire()
            if request.extended_from is not None:
                run_files.write_text(directory / run_files.RECIPE_FILE, dump_recipe(recipe))
        else:
            directory = scratch = _scratch_dir(role)
    else:
        if recipe_or_path is None:
            raise UserInputError("train needs a recipe (a path, a mapping or a Recipe).")
        recipe = _as_recipe(recipe_or_path, overrides, own_model=model is not None)
        source = model_source.describe(recipe, given=model)
        role = _checked_role(recipe)
        if role.chief:
            directory = shown = _new_run_dir(recipe, run_dir)
            lock = RunLock(directory).acquire()
        else:
            directory = scratch = _scratch_dir(role)
            shown = Path(run_dir) if run_dir is not None else None
        run_files.write_text(directory / run_files.RECIPE_FILE, dump_recipe(recipe))
        model_source.record(directory, source)
        data_source.record(directory, recipe.data)

    return OpenedRun(recipe=recipe, role=role, directory=directory, shown=shown, lock=lock,
                     scratch=scratch, model_source=source)


def answer_signals_while_joining(opened: OpenedRun, *, resume):
    """Around the strategy's creation: a cluster's workers wait there for each other."""
    strategy = opened.recipe.runtime.strategy
    if strategy not in ("auto", "multi_worker", "parameter_server") or tf_config_tasks() < 2:
        return contextlib.nullcontext()
    # MultiWorkerMirroredStrategy's workers meet in Python first (engine.cluster_join);
    # a parameter-server chief's tasks run no tfaccel code of their own to meet it.
    join = None if strategy == "parameter_server" else ClusterJoin(
        training_addresses(), opened.role.index)
    return signals_end_the_wait(
        what="waiting for the other workers of TF_CONFIG's cluster to join",
        directory=opened.directory if resume is None and opened.lock is not None else None,
        allowed=_UNSTARTED_FILES, join=join)


def remove_unstarted(opened: OpenedRun, *, resume) -> bool:
    """Removes a new run directory that holds nothing but the recipe; True if it did."""
    directory, lock = opened.directory, opened.lock
    if resume is None and lock is not None and directory.is_dir() \
            and _holds_only_the_recipe(directory):
        lock.release()
        shutil.rmtree(directory, ignore_errors=True)
        return True
    return False


def _checked_role(recipe: Recipe) -> WorkerRole:
    """This process's role in the job, and what a multi-worker run cannot do (TF-free)."""
    check_strategy_for_cluster(cluster_task(), recipe.runtime.strategy)
    role = worker_role(recipe.runtime.strategy)
    minutes = recipe.training.checkpoint_every_minutes
    if role.multi_worker and minutes:
        raise UserInputError(
            f"training.checkpoint_every_minutes ({minutes}) cannot be used by a multi-worker "
            f"run ({role.count} workers): each worker's clock would pick another step, and "
            "all of them must save together. Use training.checkpoint_every_steps.")
    return role


def _scratch_dir(role: WorkerRole) -> Path:
    """Where a non-chief worker writes what Keras and TensorFlow need written somewhere."""
    return Path(tempfile.mkdtemp(prefix=f"tfaccel-worker{role.index}-"))


def _new_run_dir(recipe: Recipe, run_dir: Optional[str]) -> Path:
    try:
        return run_files.create_run_dir(name=recipe.name, runs_dir=recipe.runtime.runs_dir,
                                        run_dir=run_dir)
    except PermissionError as error:
        raise UserInputError(
            f"cannot create the run directory: {error.strerror} ({error.filename!r}); "
            "choose a writable runtime.runs_dir or --run-dir.") from None
    except OSError as error:
        raise UserInputError(
            f"cannot create the run directory under runtime.runs_dir "
            f"{recipe.runtime.runs_dir!r}: {error.strerror or error}.") from None


# What a run directory holds before training starts (with the lock).
_UNSTARTED_FILES = (run_files.RECIPE_FILE, model_source.SOURCE_FILE, model_source.COPY_DIR,
                    data_source.SOURCE_FILE, run_files.PRECISION_FILE, LOCK_FILE)


def _holds_only_the_recipe(directory: Path) -> bool:
    return {p.name for p in directory.iterdir()} <= set(_UNSTARTED_FILES)


def _as_recipe(recipe_or_path, overrides: Sequence[str], *, own_model: bool = False) -> Recipe:
    if isinstance(recipe_or_path, Recipe):
        if overrides:
            return recipe_from_dict(recipe_to_dict(recipe_or_path), overrides=overrides,
                                    own_model=own_model)
        return recipe_or_path
    if isinstance(recipe_or_path, dict):
        return recipe_from_dict(recipe_or_path, overrides=overrides, own_model=own_model)
    return load_recipe(recipe_or_path, overrides, own_model=own_model)

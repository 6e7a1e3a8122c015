"""`train(recipe)`: the run's order, from opening its run directory to the saved model.

Each step is a module of `tfaccel.training.run`: `opened_run` (the recipe, this worker's role,
the run directory and its lock), `session` (strategy, precision, batch plan), `before_fit`
(what is checked and kept before the model), `outputs` (the callbacks), `fit_parts` (`fit`
in parts), `failures` and `summary`; the model is built by `training.model_setup`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Optional, Sequence, Union

from tfaccel.config.recipe import Recipe
from tfaccel.errors import DataError, Preempted, Stopped, UserInputError
from tfaccel.messages import say
from tfaccel.training.distributed.chief_run_dir import chief_run_dir
from tfaccel.training.fit_callbacks.best_epoch import keep_plan
from tfaccel.training.fit_callbacks.timings import PhaseTimes
from tfaccel.training.model_setup.execution import initial_steps
from tfaccel.training.model_setup.inputs import TrainData
from tfaccel.training.model_setup.model_build import build_model
from tfaccel.training.run import before_fit
from tfaccel.training.run.context import Decisions, RunContext
from tfaccel.training.run.coordinator_loop import train_on_cluster
from tfaccel.training.run.failures import as_training_error, data_error_in, non_finite_loss_error
from tfaccel.training.run.fit_parts import fit_in_parts
from tfaccel.training.run.opened_run import (
    answer_signals_while_joining,
    open_run,
    remove_unstarted,
)
from tfaccel.training.run.outputs import Outputs, make_callbacks
from tfaccel.training.run.platform_tasks import run_other_task
from tfaccel.training.run.session import open_session
from tfaccel.training.run.summary import RunResult, run_summary, write_summary
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir import run_files
from tfaccel.training.run_dir.resume import checkpoint_to_resume
from tfaccel.training.run_dir.training_state import restore_state


def train(recipe_or_path: Union[Recipe, str, os.PathLike, dict, None] = None,
          overrides: Sequence[str] = (), *, run_dir: Optional[str] = None,
          callbacks: Sequence = (), resume: Union[str, os.PathLike, None] = None,
          profile: Optional[tuple] = None, model=None) -> RunResult:
    """Runs a whole training job and leaves a run directory.

    Args:
        recipe_or_path: A `Recipe`, a path to a YAML recipe, or a recipe mapping. With
            `resume` it may be omitted (the run's own recipe.yaml is used).
        overrides: `key.path=value` overrides applied before validation.
        run_dir: Explicit run directory (must not exist or be empty); by default a new
            folder under `runtime.runs_dir`.
        callbacks: Extra Keras callbacks, run after tfaccel's own.
        resume: A run directory to continue in place from its newest good checkpoint.
            Only `training.epochs` may differ from the run's recipe (to extend it).
        profile: ``(start, end)``: write a TensorBoard profiler trace of optimizer steps
            start..end (counted from 1 over the whole run, inclusive) into the run
            directory's tensorboard/ folder.
        model: Your own model instead of the recipe's model section: a builder callable
            ``builder(*, input_shape, num_classes, **model.params)`` returning an uncompiled
            keras.Model, also given ``task=`` and ``num_outputs=`` (the output width) when
            its signature names them (`tfaccel.models.build_own_model`) (built in the
            strategy's scope, under the precision policy), or a built keras.Model (cloned
            into the strategy's scope with its weights; it keeps the dtype policy it was
            built with). The run directory records which (model_source.json); a resume must
            give the same one again.

    Returns:
        The `RunResult`; in TF_CONFIG's evaluator task a
        `tfaccel.training.run.sidecar_evaluator.EvaluationResult` (it evaluates the chief's
        checkpoints in `run_dir` instead of training; a parameter-server cluster's ps and
        worker tasks serve the chief and end the process: `run.platform_tasks`).

    Raises:
        UserInputError: The recipe, the data or the run directory is wrong, or the run
            cannot be resumed (changed recipe, already finished, in use).
        TrainingError: Training failed (for example the loss became NaN).
        Preempted: SIGTERM/SIGINT stopped training after saving a checkpoint.
    """
    started = time.perf_counter()
    # A TF_CONFIG task that does not train (a ps cluster's servers, an evaluator) does its own.
    other = run_other_task(recipe_or_path, overrides, run_dir=run_dir, resume=resume,
                           model=model)
    if other is not None:
        return other
    timings = PhaseTimes(origin=started)
    opened = open_run(recipe_or_path, overrides, run_dir=run_dir, resume=resume, model=model)
    timings.mark("open the run (recipe, run directory, lock)")
    recipe, role, directory, shown = opened.recipe, opened.role, opened.directory, opened.shown
    lock, scratch = opened.lock, opened.scratch
    try:
        # A resumed run keeps the precision `auto` chose when it started.
        recorded = run_files.recorded_precision(directory) if resume is not None else None
        with open_session(recipe, precision=recorded,
                          around_strategy=lambda: answer_signals_while_joining(
                              opened, resume=resume)) as session:
            # Every worker's closing line and resume hint name the chief's real directory.
            shown = chief_run_dir(session.strategy, role=role, own=shown)
            timings.mark("session (threads, seed, strategy, precision)")
            context = RunContext(recipe=recipe, directory=directory, session=session,
                                  started=started, extra_callbacks=tuple(callbacks),
                                  resume_from=Path(resume) if resume is not None else None,
                                  role=role, shown_dir=shown, profile=profile,
                                  given_model=model, model_source=opened.model_source,
                                  timings=timings)
            return _train_with(context)
    except Stopped as error:  # a signal while the workers waited for each other
        if remove_unstarted(opened, resume=resume):
            raise Stopped(f"{error} The run directory {opened.shown or opened.directory} "
                          "held nothing yet and was removed.", signum=error.signum) from None
        raise
    except (UserInputError, KeyboardInterrupt, SystemExit):
        # A mistake found before training (missing data, a bad batch plan), or a signal
        # before it started: do not leave a run directory that holds nothing but the recipe.
        remove_unstarted(opened, resume=resume)
        raise
    finally:
        if lock is not None:
            lock.release()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _train_with(ctx: RunContext) -> RunResult:
    """The run once its session is open: data, model, callbacks, `fit`, the end."""
    recipe, plan = ctx.recipe, ctx.session.plan
    say(f"{ctx.session.strategy_info['strategy']} on {ctx.session.strategy_info['replicas']} "
        f"replica(s), precision {ctx.session.precision}, {plan.describe()}.")
    before_fit.record_precision(ctx)
    if ctx.session.strategy_info["strategy"] == "parameter_server":  # Keras' fit cannot drive it
        return train_on_cluster(ctx)
    before_fit.check_data_service(recipe, strategy=ctx.session.strategy_info["strategy"])
    before_fit.check_compile_arguments(recipe)
    try:
        data = ctx.session.build_data()
    except Exception as error:  # only a source's DataError (or damaged file) is converted
        bad_data = data_error_in(error, data_config=recipe.data)
        if bad_data is None:
            raise
        raise DataError(bad_data) from None
    ctx.timings.mark("build the data (listing, pipeline)")
    before_fit.check_steps_against_the_epoch(recipe, data)
    before_fit.keep_vocabulary(ctx, data)
    before_fit.keep_feature_space(ctx, data)
    before_fit.measure_padding(data)
    keep, keep_note = keep_plan(keep=recipe.training.keep, monitor=recipe.training.monitor,
                                has_validation=data.validation is not None)
    if keep_note is not None:
        say(f"training.keep is best but there is {keep_note}: model.keras will hold "
            "the last epoch.")
    checkpoint = checkpoint_to_resume(ctx.resume_from, directory=ctx.directory) \
        if ctx.resuming else None
    ctx.timings.mark("look at the data (vocabulary, padding, checkpoint)")
    trained_model, model = build_model(recipe, strategy=ctx.session.strategy, plan=plan,
                                       data=data, given=ctx.given_model)
    pipeline = None
    if hasattr(trained_model, "stages"):  # runtime.strategy pipeline: say where stages run
        pipeline = trained_model.describe()
        say(trained_model.summary_text())
    decisions = Decisions(keep=keep, keep_note=keep_note, pipeline=pipeline,
                          steps_per_execution=initial_steps(
                              recipe.training.steps_per_execution))
    ctx.timings.mark("build and compile the model")
    restored = _restore(ctx, checkpoint, trained_model=trained_model, data=data)
    outputs = make_callbacks(ctx, keep=decisions.keep, data=data, plan=plan,
                             checkpoint=checkpoint, restored=restored)
    outputs.monitor.attach(trained_model, strategy=ctx.session.strategy)
    ctx.timings.mark("callbacks" + (" and the checkpoint's state" if checkpoint else ""))
    fit_started = time.perf_counter()
    try:
        decisions = fit_in_parts(ctx, decisions=decisions, trained_model=trained_model,
                                 data=data, outputs=outputs, checkpoint=checkpoint,
                                 fit_started=fit_started)
    except BaseException as error:  # its summary is written: say it, or convert it
        if isinstance(error, Preempted) and error.run_dir is None and ctx.shown_dir:
            error.run_dir = str(ctx.shown_dir)  # the callbacks raise it without knowing it
        converted = as_training_error(error, outputs=outputs, directory=ctx.shown_dir,
                                      strategy=ctx.session.strategy,
                                      peer_timeout=ctx.recipe.runtime.peer_timeout,
                                      data_config=ctx.recipe.data)
        if converted is error:
            raise
        raise converted from error
    return _finish(ctx, decisions=decisions, outputs=outputs, data=data, model=model,
                   fit_seconds=time.perf_counter() - fit_started)


def _restore(ctx: RunContext, checkpoint: Optional[ckpt.Checkpoint], *, trained_model,
             data: TrainData) -> dict:
    """A resumed run's checkpoint put back into the model (weights, optimizer, RNG states);
    its metrics and best weights returned for the callbacks."""
    if checkpoint is None:
        return {"metrics": [], "best_weights": None}
    with ctx.session.strategy.scope():  # optimizer variables are created here when missing
        restored = restore_state(trained_model, checkpoint)
    say(f"resuming from checkpoint {checkpoint.path.name}: epoch "
        f"{checkpoint.epoch + 1}, step {checkpoint.step_in_epoch} of "
        f"{data.steps_per_epoch}.")
    if ctx.recipe.data.service.dispatcher:
        say("the input comes from a tf.data service, which hands out batches in the "
            "order its workers finish them: weights, optimizer and step count resume "
            "exactly, the data position only approximately (see docs/distributed.md, "
            "tf.data service).")
    return restored


def _finish(ctx: RunContext, *, decisions: Decisions, outputs: Outputs, data: TrainData,
            model, fit_seconds: float) -> RunResult:
    """The end of a run whose `fit` returned: a NaN loss as its error, else the best epoch's
    weights (keep: best), model.keras and the summary."""
    summary = run_summary(ctx, decisions=decisions, epochs=outputs.logger.records,
                          plan=ctx.session.plan, data=data, fit_seconds=fit_seconds,
                          best=outputs.best)
    guard = outputs.guard
    if guard.failure is not None:
        write_summary(ctx.directory, dataclasses.replace(summary, status="failed",
                                                         failure=guard.failure))
        raise non_finite_loss_error(guard.failure, directory=ctx.directory)
    if outputs.best is not None:
        # keep: best: model.keras is saved from the best epoch's weights (every worker
        # sets them: the save below is a collective under multi-worker).
        outputs.best.restore_best()
    ctx.timings.mark("summary figures (and the best epoch's weights)")
    model.save(ctx.directory / run_files.MODEL_FILE)
    ctx.timings.mark("final save (model.keras)")
    summary = dataclasses.replace(summary, timings=ctx.timings.as_dict())
    return RunResult(run_dir=ctx.shown_dir, summary=write_summary(ctx.directory, summary),
                     epochs=outputs.logger.records, chief=ctx.role.chief)

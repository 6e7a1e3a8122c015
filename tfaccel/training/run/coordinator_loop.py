"""The coordinator's loop of `runtime.strategy: parameter_server`: Keras' fit does not drive it."""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path
from typing import List, Optional

import keras
import numpy as np
import tensorflow as tf

from tfaccel.config.cluster import read_parameter_server_cluster
from tfaccel.engine import ps_cluster
from tfaccel.engine.layer_sharding import sharding_report, unshard_layers
from tfaccel.errors import Preempted, TrainingError, UserInputError
from tfaccel.messages import say
from tfaccel.training.distributed.lost_ps_worker import LostWorkers
from tfaccel.training.fit_callbacks.callbacks import PreemptionSignals
from tfaccel.training.keras_objects.losses import logged_metric_names, make_loss, make_metrics
from tfaccel.training.model_setup.inputs import build_data
from tfaccel.training.model_setup.model_build import build_model
from tfaccel.training.run.context import Decisions
from tfaccel.training.run.summary import RunResult, run_summary, write_summary
from tfaccel.training.run_dir import checkpoints as ckpt
from tfaccel.training.run_dir import run_files
from tfaccel.training.run_dir.resume import checkpoint_to_resume

# Steps scheduled before the coordinator waits for them: bounds how long a checkpoint or a
# SIGTERM waits, and keeps every worker's queue full in between.
SCHEDULE_CHUNK = 50
# The step's output naming the worker that ran it (not a metric: taken out before means).
WORKER_KEY = "_worker"


def train_on_cluster(ctx):
    """Trains `ctx`'s recipe on a parameter-server cluster; the `RunResult`.

    The chief builds the data, the model and the optimizer in the strategy's scope
    (variables on the parameter servers), then schedules one closure per step with
    `ClusterCoordinator`; workers run them as they become free (asynchronously: each
    applies its gradients to the variables as they are then). Steps are counted as the
    closures that completed (`StepCounter`), the count users see in logs, metrics and
    checkpoints. A checkpoint is written every `training.checkpoint_every_steps` steps and
    at each epoch's end; `--resume` continues from the newest.

    Args:
        ctx: `tfaccel.training.run.runner`'s run context (recipe, session, directory, resume).

    Raises:
        UserInputError: What the loop does not do (accumulation, stateful metrics).
        TrainingError: A parameter server was lost, or the loss became NaN.
    """
    recipe, session = ctx.recipe, ctx.session
    training, strategy, plan = recipe.training, session.strategy, session.plan
    if training.micro_batch_size == "auto":  # runtime.strategy auto resolved to it
        raise UserInputError(
            "training.micro_batch_size auto cannot be used with a parameter_server cluster "
            "(runtime.strategy auto found one in TF_CONFIG): a worker's step cannot be "
            "retried alone. Set training.micro_batch_size to a number.")
    if plan.accumulation_steps > 1:
        raise UserInputError(
            f"training.accumulation_steps {plan.accumulation_steps} cannot be used with "
            "runtime.strategy parameter_server: each worker applies its own step to the "
            "shared variables as soon as it is done; raise training.global_batch_size "
            "instead.")
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    cluster = read_parameter_server_cluster()  # TF_CONFIG's, checked: HOST:PORT of each task
    workers = len(ps_cluster.worker_names(coordinator))
    servers = len(cluster["ps"])
    if training.early_stopping_patience or training.keep == "best" or recipe.runtime.tensorboard:
        say("under parameter_server, model.keras holds the last epoch (training.keep), with "
            "no early stopping and no TensorBoard files (docs/distributed.md, Limits).")
    with strategy.scope():
        # A fixed element order: every worker deals its share out of the same stream.
        data = build_data(recipe, plan, deterministic=True, strategy=strategy)
    trained_model, model = build_model(recipe, strategy=strategy, plan=plan, data=data,
                                       given=ctx.given_model)
    say(f"parameter servers: {servers}, workers: {workers}; "
        f"{sharding_report(model, servers=servers)}.")
    # Their closing lines name it (a task's own --run-dir may be another, or none).
    run_dir = Path(ctx.shown_dir or ctx.directory).resolve()
    worker_devices = ps_cluster.worker_names(coordinator)
    ps_cluster.tell_run_dir(run_dir, [f"/job:ps/replica:0/task:{i}" for i in range(servers)]
                            + worker_devices)
    optimizer = trained_model.optimizer
    with strategy.scope():
        optimizer.build(model.trainable_variables)
    loss_fn, metric_fns = _loss_and_metrics(training, data)
    state = _restore(ctx, model=model, optimizer=optimizer)
    counter = ps_cluster.StepCounter(state["step"])
    records: List[dict] = list(state["records"])
    checkpoints = Path(ctx.directory) / run_files.CHECKPOINTS_DIR
    steps = data.steps_per_epoch
    total = steps * training.epochs
    with strategy.scope():  # on a parameter server: it outlives any worker
        positions = tf.Variable(tf.zeros([workers], tf.int64), trainable=False,
                                name="tfaccel_worker_positions")
    iterator = ps_cluster.per_worker_iterators(
        coordinator, lambda: data.make_stream(counter.completed), positions=positions)

    @tf.function
    def train_step(iterator):
        def replica(element):
            batch, worker = element
            ps_cluster.take_position(positions, worker)
            x, y = batch[0], batch[1]
            with tf.GradientTape() as tape:
                predictions = model(x, training=True)
                loss = loss_fn(y, predictions)
                if model.losses:
                    loss += tf.add_n(model.losses)
                # mixed_float16's LossScaleOptimizer unscales what it applies; others: as is.
                scaled = optimizer.scale_loss(loss)
            gradients = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply(gradients, model.trainable_variables)
            out = {"loss": tf.cast(loss, tf.float32), WORKER_KEY: worker}
            for name, fn in metric_fns:
                out[name] = tf.reduce_mean(tf.cast(fn(y, predictions), tf.float32))
            return out

        return strategy.run(replica, args=(next(iterator),))

    # A worker back is a new process: it is told the run directory again.
    lost = LostWorkers(cluster["worker"], on_back=lambda i: ps_cluster.tell_run_dir(
        run_dir, [worker_devices[i]]))
    every = training.checkpoint_every_steps or steps
    started = time.perf_counter()
    partial = state.get("partial") or []
    epoch_seconds = 0.0
    try:
        with PreemptionSignals() as signals, lost:
            while counter.completed < total:
                epoch, done = divmod(counter.completed, steps)
                # Scheduled in chunks: a checkpoint or a signal waits for one chunk at most.
                chunk = min(every - counter.completed % every, steps - done, SCHEDULE_CHUNK)
                chunk_started = time.perf_counter()
                batch = lost.begin_batch()
                values = [coordinator.schedule(train_step, args=(iterator,))
                          for _ in range(chunk)]
                coordinator.join()
                fetched = [value.fetch() for value in values]
                lost.ran(batch, [int(f.pop(WORKER_KEY)) for f in fetched])
                partial += [{k: float(np.mean(v)) for k, v in f.items()} for f in fetched]
                counter.add(chunk)
                epoch_seconds += time.perf_counter() - chunk_started
                if not np.isfinite(partial[-1]["loss"]):
                    raise TrainingError(
                        f"the training loss became {partial[-1]['loss']} at step "
                        f"{counter.completed}; training stopped there. Lower "
                        "optimizer.learning_rate or set optimizer.clipnorm.")
                if counter.completed % steps == 0:
                    record = _epoch_record(partial, epoch=epoch + 1, step=counter.completed,
                                           examples=steps * plan.global_batch_size,
                                           seconds=epoch_seconds)
                    record.update(_evaluate(model, data.validation, loss_fn, metric_fns,
                                            steps=training.validation_steps))
                    records.append(record)
                    run_files.append_jsonl(Path(ctx.directory) / run_files.METRICS_FILE,
                                           record)
                    say(f"epoch {epoch + 1}/{training.epochs}: step {counter.completed}, "
                        + ", ".join(f"{k} {v:.4f}" for k, v in record.items()
                                    if k not in ("epoch", "step", "examples",
                                                 "train_seconds", "examples_per_sec")))
                    partial, epoch_seconds = [], 0.0

                def save(step=counter.completed, partial=partial):
                    return _save(checkpoints, model=model, optimizer=optimizer, step=step,
                                 steps_per_epoch=steps, records=records, partial=partial,
                                 keep=training.keep_checkpoints, servers=servers)

                if counter.completed % every == 0 or counter.completed % steps == 0:
                    save()
                signals.at_step(save, where=f"step {counter.completed}")
    except Preempted as error:
        error.run_dir = str(ctx.shown_dir or ctx.directory)
        raise
    except Exception as error:  # only a lost parameter server is converted
        lost = ps_cluster.lost_parameter_server(error, step=counter.completed,
                                        run_dir=ctx.shown_dir or ctx.directory,
                                        cluster=cluster)
        if lost is None:
            raise
        # Keras' own step counter is not read: it lived on the lost server.
        write_summary(ctx.directory, _summary(
            ctx, records=records, steps=counter.completed, workers=workers, servers=servers,
            optimizer_iterations=None, data=data,
            train_seconds=time.perf_counter() - started, status="failed",
            failure={"error": type(error).__name__, "message": str(lost)}))
        raise lost from None
    say(lost.steps_line() + ".")
    summary = _summary(ctx, records=records, steps=counter.completed, workers=workers,
                       servers=servers, optimizer_iterations=int(optimizer.iterations.numpy()),
                       data=data, train_seconds=time.perf_counter() - started)
    # Whole tables and kernels, as plain Embedding and Dense: model.keras loads anywhere.
    unshard_layers(model).save(Path(ctx.directory) / run_files.MODEL_FILE)
    return RunResult(run_dir=ctx.shown_dir, summary=write_summary(ctx.directory, summary),
                     epochs=records, chief=True)


def _loss_and_metrics(training, data):
    """The loss as a callable, and the metrics as ``(name, per-batch function)`` pairs.

    The step returns each metric's value on its batch and the coordinator averages them:
    a Keras metric object's running sums would be updated by several workers at once.
    """
    info = data.info
    head = dict(task=info.task, num_outputs=info.num_outputs or info.num_classes,
                per_batch=True)  # the auto metrics that keep running sums are left out
    loss = make_loss(training, task=info.task)
    loss_fn = keras.losses.get(loss) if isinstance(loss, str) else loss
    sparse = len(data.validation.element_spec[1].shape) <= 1 \
        if data.validation is not None else True
    pairs = []
    for name, metric in zip(logged_metric_names(training, **head),
                            make_metrics(training, **head)):
        if isinstance(metric, str) and metric in ("accuracy", "acc"):
            fn = keras.metrics.sparse_categorical_accuracy if sparse \
                else keras.metrics.categorical_accuracy
        elif isinstance(metric, str):
            fn = keras.metrics.get(metric)
        else:
            fn = metric
        if isinstance(fn, keras.metrics.MeanMetricWrapper):
            inner, kwargs = fn._fn, dict(fn._fn_kwargs)  # its per-batch function
            fn = lambda y, p, inner=inner, kwargs=kwargs: inner(y, p, **kwargs)
        elif isinstance(fn, keras.metrics.Metric) or not callable(fn):
            raise UserInputError(
                f"training.metrics {name!r} keeps running sums across batches, which the "
                "workers of runtime.strategy parameter_server would update at once; use a "
                "metric that is a mean of per-batch values (accuracy, "
                "sparse_categorical_accuracy, mean_absolute_error, ...).")
        pairs.append((name, fn))
    return loss_fn, pairs


def _epoch_record(partial: List[dict], *, epoch: int, step: int, examples: int,
                  seconds: float) -> dict:
    """The epoch's means of its steps' loss and metrics, as metrics.jsonl holds them."""
    record = {"epoch": epoch, "step": step}
    for key in partial[0]:
        record[key] = float(np.mean([p[key] for p in partial]))
    record.update(examples=examples, train_seconds=seconds,
                  examples_per_sec=examples / seconds if seconds else 0.0)
    return record


def _evaluate(model, validation, loss_fn, metric_fns, *, steps: Optional[int]) -> dict:
    """The validation split on the coordinator (it reads the variables from the servers)."""
    if validation is None:
        return {}
    sums, batches = {}, 0
    for batch in validation.take(steps) if steps else validation:
        x, y = batch[0], batch[1]
        predictions = model(x, training=False)
        values = {"val_loss": loss_fn(y, predictions)}
        for name, fn in metric_fns:
            values[f"val_{name}"] = np.mean(np.asarray(fn(y, predictions)))
        for key, value in values.items():
            sums[key] = sums.get(key, 0.0) + float(np.mean(np.asarray(value)))
        batches += 1
    return {key: value / max(batches, 1) for key, value in sums.items()}


def _variables(model, optimizer) -> list:
    return list(model.variables) + list(optimizer.variables)


def _save(folder: Path, *, model, optimizer, step: int, steps_per_epoch: int, records: list,
          partial: list, keep: int, servers: int) -> Path:
    """One checkpoint (`checkpoints.write_checkpoint`, as every run's): every variable read
    back from the servers, and the loop's state; all but the newest `keep` removed.

    `servers` is recorded: how the tables were sharded follows from it (an evaluator
    rebuilds the same variables, `sidecar_evaluator`)."""
    def write_files(target: Path) -> None:
        arrays = {f"v{i}": np.asarray(v.numpy())
                  for i, v in enumerate(_variables(model, optimizer))}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        (target / ckpt.VARIABLES_FILE).write_bytes(buffer.getvalue())

    epoch, step_in_epoch = divmod(step, steps_per_epoch)
    path = ckpt.write_checkpoint(
        folder, name=ckpt.checkpoint_name(kind="step", epoch=epoch, global_step=step),
        state={"global_step": step, "epoch": epoch, "step_in_epoch": step_in_epoch,
               "records": records, "partial": partial, "strategy": "parameter_server",
               "parameter_servers": servers},
        write_files=write_files)
    ckpt.prune_step_checkpoints(folder, keep=keep)
    return path


def _restore(ctx, *, model, optimizer) -> dict:
    """The loop's state: from the newest good checkpoint when resuming, else step 0."""
    fresh = {"step": 0, "records": [], "partial": []}
    if ctx.resume_from is None:
        return fresh
    checkpoint = checkpoint_to_resume(ctx.resume_from, directory=ctx.directory)
    if checkpoint is None:
        return fresh
    path = checkpoint.path / ckpt.VARIABLES_FILE
    if not path.is_file():
        raise UserInputError(f"{checkpoint.path} holds no {ckpt.VARIABLES_FILE}: it was not "
                             "written by a parameter-server run; resume it with the "
                             "runtime.strategy it was written with.")
    state = {"step": checkpoint.global_step, "records": checkpoint.state["records"],
             "partial": checkpoint.state["partial"]}
    with np.load(path) as saved:
        variables = _variables(model, optimizer)
        if len(saved.files) != len(variables):
            raise UserInputError(f"{path} holds {len(saved.files)} variables but the "
                                 f"model and optimizer have {len(variables)}; it is not "
                                 "this run's checkpoint, or it was written with another "
                                 "number of parameter servers (a sharded table or Dense "
                                 "kernel has one variable per server): resume with the "
                                 "same --ps N.")
        for i, variable in enumerate(variables):
            variable.assign(saved[f"v{i}"])
    run_files.write_jsonl(Path(ctx.directory) / run_files.METRICS_FILE, state["records"])
    say(f"resuming from checkpoint {checkpoint.path.name}: step {state['step']} (weights, "
        "optimizer and step count exact; the data stream restarts at that step's batch, "
        "dealt to the workers in turn).")
    return state


def _summary(ctx, *, records, steps, workers, servers, optimizer_iterations, data,
             train_seconds, status: str = "completed", failure=None):
    """The run's `RunSummary` (`run_summary`, as every run's) with what the loop counts."""
    summary = run_summary(ctx, decisions=Decisions(), epochs=records, plan=ctx.session.plan,
                          data=data, fit_seconds=train_seconds, status=status)
    return dataclasses.replace(
        summary, strategy="parameter_server", workers=workers, parameter_servers=servers,
        # THE count: closures the coordinator saw complete; Keras' own counter beside it.
        steps_completed=steps, optimizer_iterations=optimizer_iterations,
        train_seconds=train_seconds, failure=failure)

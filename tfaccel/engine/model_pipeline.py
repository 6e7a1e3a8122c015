"""Layer-wise model parallelism: a Keras model in stages on devices, micro-batches pipelined."""

import keras
import tensorflow as tf

from tfaccel.engine.keras_compat import BuildsBeforeTracing
from tfaccel.engine.micro_batches import (
    end_train_step,
    first_tensor,
    micro_batch_share,
    slice_structure,
)
from tfaccel.engine.model_split import split_model
from tfaccel.errors import UserInputError


def pipeline(model, *, split_at=None, stages=None, micro_batches=1, devices=None,
             accumulation_steps=1):
    """Split `model` into stages on devices and train it in pipelined micro-batches.

    GPipe's schedule inside one compiled step: each batch is cut into `micro_batches`
    micro-batches, all of them go forward through stage 1, then stage 2, ..., and back;
    TensorFlow's executor runs stage s on micro-batch m while stage s+1 works on m-1
    (different devices, no data dependency). Gradients are summed over micro-batches and
    the optimizer is applied once per batch, so training matches a plain `fit` on the
    same batches (to float rounding).

    Args:
        model: A built functional or Sequential Keras model (a subclassed one is refused).
            Its weights are copied into a placed copy; `model` itself is not trained.
        split_at: Names of the layers that end a stage (all stages but the last).
        stages: Instead of `split_at`: a number of stages balanced by parameter count.
            Neither: one stage per device.
        micro_batches: Micro-batches per batch in flight through the stages, >= 1.
        devices: Device names, stage i on devices[i % len(devices)]; default every GPU,
            else every logical CPU.
        accumulation_steps: Groups of `micro_batches` run one after another per batch
            (gradient accumulation: memory for one group's activations at a time).

    Returns:
        A `PipelineModel`; compile it (the copy is uncompiled), then fit. `.inner` is the
        placed plain model to save or export, `.stages` its `Stage`s.

    Raises:
        UserInputError: see `split_model`; `micro_batches` or `accumulation_steps` not an
            integer >= 1.
    """
    for name, value in (("micro_batches", micro_batches),
                        ("accumulation_steps", accumulation_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserInputError(f"pipeline {name} must be an integer >= 1; got {value!r}")
    placed, parts = split_model(model, split_at=split_at, stages=stages, devices=devices)
    return PipelineModel(placed, parts, micro_batches=micro_batches,
                         accumulation_steps=accumulation_steps)


def pipeline_from_recipe(model, runtime, accumulation_steps):
    """`pipeline` with a recipe's runtime.pipeline keys and runtime.devices.

    Args:
        model: The recipe's built Keras model.
        runtime: The recipe's `RuntimeConfig` (strategy pipeline).
        accumulation_steps: The batch plan's accumulation steps.

    Returns:
        The uncompiled `PipelineModel`.
    """
    keys = runtime.pipeline
    split_at = list(keys.split_at) if keys.split_at is not None else None
    return pipeline(model, split_at=split_at, stages=keys.stages,
                    micro_batches=keys.micro_batches, devices=runtime.devices,
                    accumulation_steps=accumulation_steps)


class PipelineModel(BuildsBeforeTracing, keras.Model):
    """A Keras model whose stages run on their devices, trained in pipelined micro-batches.

    Semantics (as `AccumulatingModel`'s, whose micro-batch weighting it shares):
      * A batch of N examples is cut into accumulation_steps x micro_batches contiguous
        micro-batches of sizes differing by at most one; micro-batch j's loss weighs
        n_j / N (masked losses: its share of valid entries), so the summed gradient is
        the full batch's for mean-reduced losses, regularisation included. A batch with
        fewer examples than pieces (a short last batch) runs one piece per example and
        skips the rest.
      * BatchNormalization normalises each micro-batch by its own statistics and updates
        its moving averages once per micro-batch: not the full batch's numbers (as with
        accumulation). Dropout draws a new mask per micro-batch from Keras' seed
        generator: a different draw than the full batch's, the same distribution.
      * `evaluate` and `predict` run whole batches through the stages.
      * `jit_compile=True` is refused: one XLA cluster would ignore the stages' devices.
    """

    def __init__(self, placed, stages, *, micro_batches=1, accumulation_steps=1, **kwargs):
        kwargs.setdefault("name", f"{placed.name}_pipeline")
        super().__init__(**kwargs)
        self._inner = placed
        self._stages = list(stages)
        self.micro_batches = micro_batches
        self.accumulation_steps = accumulation_steps
        self.built = True

    @property
    def inner(self):
        """The placed plain model (shares its weights); save or export this one."""
        return self._inner

    @property
    def stages(self):
        """The `Stage`s, first to last."""
        return list(self._stages)

    def describe(self):
        """The schedule and, per stage, its device, layer names and parameter count.

        Returns:
            ``{"micro_batches", "accumulation_steps", "stages": [Stage.describe(), ...]}``.
        """
        return {"micro_batches": self.micro_batches,
                "accumulation_steps": self.accumulation_steps,
                "stages": [stage.describe() for stage in self._stages]}

    def summary_text(self):
        """One line per stage: its device, parameter count and layers, and the schedule."""
        lines = [f"pipeline: {len(self._stages)} stage(s), {self.micro_batches} micro-batch(es) "
                 f"in flight, {self.accumulation_steps} accumulation step(s) per batch"]
        for stage in self._stages:
            lines.append(f"  stage {stage.index} on {stage.device}: {stage.parameters:,} "
                         f"parameters, layers {', '.join(stage.layers)}")
        return "\n".join(lines)

    def compile(self, *args, **kwargs):
        if kwargs.get("jit_compile") is True:
            raise UserInputError(
                "jit_compile=True cannot compile a pipeline: XLA would compile the stages "
                "into one cluster on one device; use jit_compile=False (or auto)")
        kwargs["jit_compile"] = False
        super().compile(*args, **kwargs)
        optimizer = self.optimizer
        while optimizer is not None:  # a LossScaleOptimizer builds its inner one's slots
            _place_slots_with_their_variable(optimizer)
            optimizer = getattr(optimizer, "inner_optimizer", None)

    def call(self, inputs, training=None):
        outputs = inputs
        for stage in self._stages:
            with tf.device(stage.device):
                outputs = stage.model(outputs, training=training)
        return outputs

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        batch = tf.shape(first_tensor(x))[0]
        variables = list(self.trainable_variables)
        groups = self.accumulation_steps
        pieces = tf.minimum(tf.constant(groups * self.micro_batches), batch)
        masked = []
        has_gradient = []
        # A batch of known size (drop_remainder) that fills every piece needs no guard.
        static = first_tensor(x).shape[0]
        guarded = static is None or static < groups * self.micro_batches

        def step(i, entries):
            start = (i * batch) // pieces
            end = ((i + 1) * batch) // pieces
            piece = slice_structure((x, y, sample_weight), start, end)
            loss, gradients, valid_i, entries = self._micro_step(
                piece, end - start, batch, variables, masked)
            if not has_gradient:
                has_gradient.extend(gr is not None for gr in gradients)
            gradients = [tf.zeros(v.shape, v.dtype) if gr is None else tf.cast(gr, v.dtype)
                         for gr, v in zip(gradients, variables)]
            return tf.cast(loss, tf.float32), gradients, valid_i, entries

        def skip(entries):
            return (tf.constant(0.0), [tf.zeros(v.shape, v.dtype) for v in variables],
                    tf.constant(0.0), entries)

        def group(g, total_loss, valid, entries, accumulators):
            for m in range(self.micro_batches):
                i = g * self.micro_batches + m
                if not guarded or (groups == 1 and m == 0):
                    loss, gradients, valid_i, entries = step(i, entries)
                else:
                    # A batch smaller than micro_batches x accumulation_steps (a short last
                    # batch) has fewer pieces than that: the rest are skipped, not run
                    # empty (BatchNorm's statistics of no example would be NaN).
                    loss, gradients, valid_i, entries = tf.cond(
                        i < pieces, lambda i=i, e=entries: step(i, e),
                        lambda e=entries: skip(e))
                accumulators = [acc + gr for acc, gr in zip(accumulators, gradients)]
                total_loss += loss
                valid += valid_i
            return g + 1, total_loss, valid, entries, accumulators

        state = (tf.constant(0), tf.constant(0.0), tf.constant(0.0), tf.constant(1.0),
                 [tf.zeros(v.shape, dtype=v.dtype) for v in variables])
        if groups == 1:
            # Unrolled in the step's graph: the executor overlaps micro-batches on stages.
            _, total_loss, valid, entries, summed = group(*state)
        else:
            _, total_loss, valid, entries, summed = tf.while_loop(
                lambda g, *_: g < groups, group, state,
                # One group of activations alive at a time: the point of accumulating.
                parallel_iterations=1)
        return end_train_step(self, total_loss=total_loss, gradients=summed,
                              has_gradient=has_gradient, variables=variables, batch=batch,
                              valid=valid, entries=entries, masked=masked)

    def _micro_step(self, piece, size, batch, variables, masked):
        """Forward through every stage then backward stage by stage, each on its device."""
        x_i, y_i, sw_i = piece
        tapes, inputs, outputs = [], [], []
        last = len(self._stages) - 1
        hidden = x_i
        for stage in self._stages:
            with tf.device(stage.device):
                with tf.GradientTape() as tape:
                    if stage.index:
                        tape.watch(hidden)
                    inputs.append(hidden)
                    hidden = stage.model(hidden, training=True)
                    if stage.index == last:
                        loss = self._compute_loss(x=x_i, y=y_i, y_pred=hidden,
                                                  sample_weight=sw_i, training=True)
                        share, valid_i, entries = micro_batch_share(
                            hidden, size=size, batch=batch, masked=masked)
                        loss = loss * tf.cast(share, loss.dtype)
                        hidden_loss = self.optimizer.scale_loss(loss)
                tapes.append(tape)
                outputs.append(hidden_loss if stage.index == last else hidden)
        self.compute_metrics(x_i, y_i, hidden, sample_weight=sw_i)
        position = {id(v): i for i, v in enumerate(variables)}
        total = [None] * len(variables)
        upstream = None
        for stage in reversed(self._stages):
            with tf.device(stage.device):
                # The last stage's loss holds every layer's regularisation terms: its
                # gradient goes to all variables; each stage passes its input's back.
                wanted = variables if stage.index == last else list(
                    stage.model.trainable_variables)
                sources = wanted + ([inputs[stage.index]] if stage.index else [])
                grads = tapes[stage.index].gradient(outputs[stage.index], sources,
                                                    output_gradients=upstream)
                upstream = grads[-1] if stage.index else None
                for variable, gradient in zip(wanted, grads):
                    if gradient is None:
                        continue
                    j = position[id(variable)]
                    gradient = tf.convert_to_tensor(gradient)
                    total[j] = gradient if total[j] is None else total[j] + gradient
        return loss, total, valid_i, entries


def _place_slots_with_their_variable(optimizer):
    # Keras' TF optimizer asks the strategy to colocate a slot (Adam's moments) with its
    # variable, which the default strategy ignores in eager mode: the slots would all land
    # on the first device. Each slot is created on its variable's device instead.
    create = optimizer.add_variable_from_reference

    def placed(reference_variable, *args, **kwargs):
        with tf.device(reference_variable.value.device):
            return create(reference_variable, *args, **kwargs)

    optimizer.add_variable_from_reference = placed

"""Exact gradient accumulation for any Keras model, inside the compiled step, under any strategy."""

import warnings

import keras
import tensorflow as tf

from tfaccel.engine.keras_compat import BuildsBeforeTracing
from tfaccel.engine.micro_batches import (
    end_train_step,
    first_tensor,
    micro_batch_share,
    slice_structure,
    track_loss,
    weigh_masked,
)
from tfaccel.errors import UserInputError

# Loss reductions for which "weight each micro-batch by its share of examples" reproduces
# the full-batch loss exactly. All built-in Keras losses default to sum_over_batch_size.
_MEAN_REDUCTIONS = ("sum_over_batch_size", "mean")


def accumulate(model, steps):
    """Give a Keras model gradient accumulation over `steps` micro-batches.

    Each (per-replica) batch that `fit` delivers is split into `steps` micro-batches
    inside the compiled train step; their gradients are summed and the optimizer is
    applied once. Training therefore matches a plain `fit` on the same batch while only
    one micro-batch of activations is held in memory at a time. Works under
    `tf.distribute` strategies (unlike Keras' `gradient_accumulation_steps`,
    keras-team/keras#20582). Call it (and `compile`) inside `strategy.scope()`.

    Args:
        model: A Keras 3 model (Sequential, functional or subclassed). Its layers and
            weights are shared, not copied.
        steps: Number of micro-batches per batch, an integer >= 1.

    Returns:
        An `AccumulatingModel`. If `model` was already compiled, the wrapper is compiled
        from the same compile config (fresh optimizer state); otherwise compile it.

    Raises:
        UserInputError: `model` is not a Keras model, or `steps` is not an integer >= 1.
    """
    wrapper = AccumulatingModel(model, steps)
    if getattr(model, "compiled", False):
        config = model.get_compile_config()
        if config:
            wrapper.compile_from_config(config)
    return wrapper


@keras.saving.register_keras_serializable(package="tfaccel")
class AccumulatingModel(BuildsBeforeTracing, keras.Model):
    """A Keras model that accumulates gradients over micro-batches of each batch.

    Semantics:
      * A per-replica batch of N examples is cut into `steps` contiguous micro-batches of
        sizes that differ by at most one (N // steps or N // steps + 1). A batch smaller
        than `steps` (a short last batch) uses one example per micro-batch.
      * Micro-batch j's loss is weighted by n_j / N, so the summed gradient equals the
        gradient of the full-batch loss for mean-reduced losses ("sum_over_batch_size",
        Keras' default, with or without sample weights, zero weights included: Keras
        divides by the number of examples, not by the sum of the weights) plus
        regularisation losses.
        Losses with another reduction ("sum", ...) raise UserInputError when the step
        is first traced, rather than train on a silently different objective.
      * Masked outputs (`Embedding(mask_zero=True)`, per-token losses): Keras divides the
        loss by the number of valid mask entries, so micro-batch j is weighted by its
        share of the batch's valid entries instead (Keras 3.15 divides by that count,
        whatever the sample weights; 0 when nothing is valid); exact like a plain fit,
        with per-token sample weights too. A model with several outputs of which one is
        masked raises UserInputError.
      * `evaluate` and `predict` also run in `steps` micro-batches per batch (the memory
        limit that called for accumulation applies there too), with the same loss,
        metrics and predictions as whole batches; under `jit_compile=True` they use
        whole batches (XLA needs static shapes that a partial batch does not divide into).
      * BatchNorm (and any layer with state updated in training) sees each micro-batch
        separately: batch statistics are per micro-batch and moving averages are updated
        `steps` times per optimizer step.
      * With `jit_compile=True` the per-replica batch must be divisible by `steps` (XLA
        needs static micro-batch shapes).
      * Sparse gradients (tf.IndexedSlices, e.g. from Embedding) are summed as dense
        tensors. SGD matches a plain fit exactly; Adam-type optimizers match a plain fit
        on dense gradients, not Keras' row-wise IndexedSlices update (which touches only
        the rows seen and squares each occurrence separately).
      * Mixed precision: the loss is scaled by `optimizer.scale_loss` per micro-batch;
        Keras' LossScaleOptimizer unscales (and skips non-finite steps) in `apply`.

    Save `model.inner` for inference or export: it is a plain Keras model that loads
    anywhere. The wrapper itself also saves and reloads as a `.keras` file, provided the
    loading process has imported `tfaccel.engine.accumulation` (which registers the
    class; a bare `import tfaccel` is lazy and does not).
    """

    def __init__(self, model, steps, **kwargs):
        if not isinstance(model, keras.Model):
            raise UserInputError(f"model must be a keras.Model; got {type(model).__name__}")
        if isinstance(model, AccumulatingModel):
            raise UserInputError("model is already an AccumulatingModel; wrap the inner model once")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise UserInputError(f"steps must be an integer >= 1; got {steps!r}")
        kwargs.setdefault("name", f"{model.name}_accumulating")
        super().__init__(**kwargs)
        if self._distribute_strategy is None:
            # Keras binds a model to the strategy in scope at creation; wrapping a model
            # outside the scope it was built in must not silently fall back to one device.
            self._distribute_strategy = getattr(model, "_distribute_strategy", None)
        self._inner = model
        self.steps = steps
        if model.built:
            self.built = True

    @property
    def inner(self):
        """The wrapped model (shares its weights); save or export this one for inference."""
        return self._inner

    def call(self, inputs, training=None):
        return self._inner(inputs, training=training)

    def get_config(self):
        return {
            "name": self.name,
            "steps": self.steps,
            "model": keras.saving.serialize_keras_object(self._inner),
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        model = keras.saving.deserialize_keras_object(
            config.pop("model"), custom_objects=custom_objects
        )
        return cls(model, **config)

    def train_step(self, data):
        if self.steps == 1:
            return super().train_step(data)
        self._check_loss_reductions()
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        batch = tf.shape(first_tensor(x))[0]
        if not self._inner.built:
            # A subclassed model creates its weights on its first call; they must exist
            # before the loop (variables cannot be created inside a while loop).
            self(slice_structure(x, 0, 1), training=False)
            self.built = True
        variables = list(self.trainable_variables)
        if not variables:
            warnings.warn("The model does not have any trainable weights.")
            return super().train_step(data)
        slicer = self._xla_slicer if self.jit_compile else self._dynamic_slicer
        micro_batches, take = slicer(batch, (x, y, sample_weight))

        # Which variables get no gradient is a property of the graph, fixed when the body
        # is traced; such variables get None (as in Keras' own step), not a zero update.
        has_gradient = []
        masked = []

        def body(i, total_loss, valid, entries, accumulators):
            (x_i, y_i, sw_i), size = take(i)
            with tf.GradientTape() as tape:
                y_pred = self(x_i, training=True) if self._call_has_training_arg else self(x_i)
                loss = self._compute_loss(
                    x=x_i, y=y_i, y_pred=y_pred, sample_weight=sw_i, training=True
                )
                share, valid_i, entries = micro_batch_share(y_pred, size=size, batch=batch,
                                                            masked=masked)
                loss = loss * tf.cast(share, loss.dtype)
                scaled = self.optimizer.scale_loss(loss)
            gradients = tape.gradient(scaled, variables)
            if not has_gradient:
                has_gradient.extend(g is not None for g in gradients)
            self.compute_metrics(x_i, y_i, y_pred, sample_weight=sw_i)
            accumulators = [
                acc if g is None else acc + tf.cast(tf.convert_to_tensor(g), acc.dtype)
                for acc, g in zip(accumulators, gradients)
            ]
            return (i + 1, total_loss + tf.cast(loss, tf.float32), valid + valid_i, entries,
                    accumulators)

        zeros = [tf.zeros(v.shape, dtype=v.dtype) for v in variables]
        _, total_loss, valid, entries, summed = tf.while_loop(
            lambda i, *_: i < micro_batches,
            body,
            (tf.constant(0), tf.constant(0.0, tf.float32), tf.constant(0.0, tf.float32),
             tf.constant(1.0, tf.float32), zeros),
            # The loop runs a fixed, small number of times; keep one micro-batch of
            # activations alive at a time rather than pipelining iterations.
            parallel_iterations=1,
        )
        return end_train_step(self, total_loss=total_loss, gradients=summed,
                              has_gradient=has_gradient, variables=variables, batch=batch,
                              valid=valid, entries=entries, masked=masked)

    def _eval_micro_batches(self):
        # XLA needs static micro-batch shapes, which a partial validation batch does not
        # divide into: under jit_compile, evaluation and prediction use whole batches.
        return self.steps > 1 and not self.jit_compile

    def test_step(self, data):
        """Evaluates one batch in micro-batches (as training holds them in memory).

        The loss is weighted per micro-batch exactly as in `train_step` and the metrics
        are updated per micro-batch, so the results equal a whole-batch evaluation.
        """
        if not self._eval_micro_batches():
            return super().test_step(data)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        batch = tf.shape(first_tensor(x))[0]
        micro_batches, take = self._dynamic_slicer(batch, (x, y, sample_weight))
        masked = []

        def body(i, total_loss, valid, entries):
            (x_i, y_i, sw_i), size = take(i)
            y_pred = self(x_i, training=False) if self._call_has_training_arg else self(x_i)
            loss = self._compute_loss(x=x_i, y=y_i, y_pred=y_pred, sample_weight=sw_i,
                                      training=False)
            share, valid_i, entries = micro_batch_share(y_pred, size=size, batch=batch,
                                                        masked=masked)
            self.compute_metrics(x_i, y_i, y_pred, sample_weight=sw_i)
            loss = tf.cast(loss, tf.float32) * share
            return i + 1, total_loss + loss, valid + valid_i, entries

        _, total_loss, valid, entries = tf.while_loop(
            lambda i, *_: i < micro_batches, body,
            (tf.constant(0), tf.constant(0.0), tf.constant(0.0), tf.constant(1.0)),
            parallel_iterations=1)
        total_loss, _ = weigh_masked(total_loss, [], valid=valid, entries=entries,
                                     masked=masked)
        track_loss(self, total_loss, batch=batch)
        return self.get_metrics_result()

    def predict_step(self, data):
        """Predicts one batch in micro-batches and returns the concatenated outputs."""
        if not self._eval_micro_batches():
            return super().predict_step(data)
        x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
        batch = tf.shape(first_tensor(x))[0]
        micro_batches, take = self._dynamic_slicer(batch, (x, None, None))
        # Only dtypes and nesting are needed: one TensorArray per output, concatenated after.
        spec = self.compute_output_spec(slice_structure(x, 0, 1))
        outputs = keras.tree.map_structure(
            lambda s: tf.TensorArray(s.dtype, size=0, dynamic_size=True, infer_shape=False),
            spec)

        def body(i, arrays):
            (x_i, _, _), _ = take(i)
            y_pred = self(x_i, training=False) if self._call_has_training_arg else self(x_i)
            arrays = keras.tree.map_structure(lambda a, t: a.write(i, t), arrays, y_pred)
            return i + 1, arrays

        _, outputs = tf.while_loop(lambda i, *_: i < micro_batches, body,
                                   (tf.constant(0), outputs), parallel_iterations=1)
        return keras.tree.map_structure(lambda a: a.concat(), outputs)

    def _dynamic_slicer(self, batch, data):
        """Micro-batches of sizes differing by at most one; any batch size works."""
        micro_batches = tf.minimum(tf.constant(self.steps), batch)

        def take(i):
            start = (i * batch) // micro_batches
            end = ((i + 1) * batch) // micro_batches
            return slice_structure(data, start, end), end - start

        return micro_batches, take

    def _xla_slicer(self, batch, data):
        """Equal static-size micro-batches, as XLA needs; the batch must divide evenly."""
        static = first_tensor(data[0]).shape[0]
        if static is not None and static % self.steps:
            raise UserInputError(_indivisible_message(static, self.steps))
        steps = self.steps
        # tf.debugging asserts are dropped under XLA, but a reshape that does not divide
        # fails its compilation. Reshaping the example indices (rather than the data)
        # makes that error name both numbers: "a tensor with <batch> values, but the
        # requested shape requires a multiple of <steps>". The remainder is never lost.
        rows = tf.reshape(tf.range(batch), [steps, -1])

        def take(i):
            index = rows[i]
            picked = keras.tree.map_structure(
                lambda t: None if t is None else tf.gather(t, index), data
            )
            return picked, tf.shape(index)[0]

        return tf.constant(steps), take

    def _check_loss_reductions(self):
        for loss in keras.tree.flatten(getattr(self, "loss", None)):
            reduction = getattr(loss, "reduction", None)
            if isinstance(loss, keras.losses.Loss) and reduction not in _MEAN_REDUCTIONS:
                raise UserInputError(
                    "accumulation is exact only for mean-reduced losses "
                    f"({', '.join(_MEAN_REDUCTIONS)}); loss {loss.name!r} has "
                    f"reduction={reduction!r}"
                )


def _indivisible_message(batch, steps):
    return (
        f"with jit_compile=True the per-replica batch ({batch}) must be divisible by the "
        f"accumulation steps ({steps}); use a batch size that is a multiple of "
        f"steps x replicas, or drop_remainder=True"
    )

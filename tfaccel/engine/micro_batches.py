"""The step over micro-batches that accumulation and the model pipeline share: the slicing,
each micro-batch's weight in the batch's loss, and the step's end (one optimizer step)."""

import keras
import tensorflow as tf

from tfaccel.errors import UserInputError


def micro_batch_share(y_pred, *, size, batch, masked):
    """The weight of one micro-batch's loss in the whole batch's loss.

    Unmasked, a mean-reduced loss divides by the number of examples, so micro-batch j
    weighs n_j / N: exact with a short micro-batch, never a mean of unequal means. Masked
    (e.g. `Embedding(mask_zero=True)`, per-token losses), Keras 3.15's `apply_mask` gives
    valid entries the weight total / valid (`divide_no_nan`: 0 when none is valid), so
    the loss is sum(loss * sample_weight over valid entries) / valid: the count of valid
    mask entries, whatever the sample weights. Micro-batch j must therefore weigh
    valid_j / valid. The batch's valid count is known only after the loop, so here j
    weighs valid_j / entries (entries: the batch's mask size, so the weight stays
    <= n_j / N and scaled float16 gradients cannot grow), and the loop's result is
    multiplied by entries / valid. `masked` records, at trace time, which case this is.

    Returns:
        ``(weight, valid entries of this micro-batch, mask entries of the whole batch)``.
    """
    masks = [getattr(t, "_keras_mask", None) for t in keras.tree.flatten(y_pred)]
    present = [m for m in masks if m is not None]
    if not masked:
        masked.append(bool(present))
    if not present:
        share = tf.cast(size, tf.float32) / tf.cast(batch, tf.float32)
        return share, tf.constant(0.0), tf.constant(1.0)
    if len(masks) > 1:
        raise UserInputError(
            "accumulation is exact for a masked loss on a model with ONE output; this model "
            f"has {len(masks)} outputs and at least one carries a Keras mask "
            "(e.g. from Embedding(mask_zero=True)). Accumulate without masks, or train "
            "without accumulation.")
    mask = tf.cast(present[0], tf.float32)
    valid = tf.reduce_sum(mask)
    entries = tf.cast(tf.size(mask), tf.float32) * tf.cast(batch, tf.float32) / tf.cast(
        size, tf.float32)
    return valid / entries, valid, entries


def first_tensor(structure):
    """The first tensor of a batch's nested structure: its leading size is the batch's."""
    for item in keras.tree.flatten(structure):
        if item is not None:
            return item
    raise UserInputError("the batch holds no input tensors to split into micro-batches")


def slice_structure(structure, start, end):
    """Examples ``start:end`` of every tensor of a nested structure (None stays None)."""
    return keras.tree.map_structure(lambda t: None if t is None else t[start:end], structure)


def unscale_for_distribution(loss):
    """The loss as Keras reports it under a strategy: the per-replica one times replicas."""
    # Keras divides each replica's loss by the number of replicas (so that the summed
    # gradients are a mean); the reported loss multiplies it back, as Keras' step does.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss * replicas if replicas > 1 else loss


def weigh_masked(total_loss, gradients, *, valid, entries, masked):
    """The summed loss and gradients with a masked loss's last factor (entries / valid).

    Keras divides a masked loss by the batch's count of VALID entries, known only after
    every micro-batch ran: each one was weighed by valid_j / entries (`micro_batch_share`),
    so the sums are multiplied by entries / valid here. Unmasked: returned as they are.
    """
    if masked and masked[0]:
        factor = tf.math.divide_no_nan(entries, valid)
        return total_loss * factor, [g * tf.cast(factor, g.dtype) for g in gradients]
    return total_loss, gradients


def track_loss(model, total_loss, *, batch):
    """The batch's loss into the model's loss tracker, as Keras' own step reports it."""
    model._loss_tracker.update_state(unscale_for_distribution(total_loss), sample_weight=batch)


def end_train_step(model, *, total_loss, gradients, has_gradient, variables, batch, valid,
                   entries, masked):
    """The end of a step over micro-batches: one optimizer step on the summed gradients.

    Shared by gradient accumulation and the model pipeline: the masked loss's last factor
    (`weigh_masked`), the loss tracker, then `apply_gradients` once, outside any tf.cond
    (safe under MirroredStrategy: no merge_call in a conditional branch, and with
    LossScaleOptimizer). A variable that got no gradient in the traced graph gets None,
    as in Keras' own step, not a zero update.

    Args:
        model: The Keras model whose step this is (its optimizer, tracker and metrics).
        total_loss: The sum of the micro-batches' weighted losses (float32).
        gradients: The summed gradients, one per variable of `variables`.
        has_gradient: Per variable, whether the traced graph gives it a gradient.
        variables: The trainable variables, in the gradients' order.
        batch: The batch's number of examples (the tracker's weight).
        valid: The batch's valid mask entries (masked losses), summed over micro-batches.
        entries: The batch's mask entries (`micro_batch_share`'s third value).
        masked: `micro_batch_share`'s trace-time record of a masked loss.

    Returns:
        The model's metrics result, as `train_step` returns it.
    """
    total_loss, gradients = weigh_masked(total_loss, gradients, valid=valid, entries=entries,
                                         masked=masked)
    track_loss(model, total_loss, batch=batch)
    model.optimizer.apply_gradients(
        [(g if ok else None, v) for g, ok, v in zip(gradients, has_gradient, variables)])
    return model.get_metrics_result()

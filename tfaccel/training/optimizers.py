"""Builds the Keras optimizer and learning-rate schedule from the optimizer section."""

from __future__ import annotations

from tfaccel.config.recipe import OptimizerConfig


def make_optimizer(config: OptimizerConfig, *, total_steps: int, steps_per_epoch: int):
    """Returns a Keras optimizer for `config`.

    Args:
        config: The recipe's optimizer section.
        total_steps: Optimizer steps in the whole run (for the cosine schedule).
        steps_per_epoch: Optimizer steps per epoch (for warm-up given in epochs).

    Returns:
        A `keras.optimizers.Optimizer`.
    """
    import keras

    learning_rate = config.learning_rate
    if config.schedule == "cosine":
        warmup_steps = int(round(config.warmup_epochs * steps_per_epoch))
        decay_steps = max(1, total_steps - warmup_steps)
        if warmup_steps:
            learning_rate = keras.optimizers.schedules.CosineDecay(
                initial_learning_rate=0.0, decay_steps=decay_steps,
                warmup_target=config.learning_rate, warmup_steps=warmup_steps)
        else:
            learning_rate = keras.optimizers.schedules.CosineDecay(
                initial_learning_rate=config.learning_rate, decay_steps=decay_steps)
    common = {"learning_rate": learning_rate}
    if config.clipnorm is not None:
        common["clipnorm"] = config.clipnorm
    if config.name == "adam":
        if config.weight_decay:
            common["weight_decay"] = config.weight_decay
        return keras.optimizers.Adam(**common)
    if config.name == "adamw":
        return keras.optimizers.AdamW(weight_decay=config.weight_decay or 0.004, **common)
    if config.name == "sgd":
        if config.weight_decay:
            common["weight_decay"] = config.weight_decay
        return keras.optimizers.SGD(momentum=config.momentum, **common)
    if config.weight_decay:
        common["weight_decay"] = config.weight_decay
    return keras.optimizers.RMSprop(momentum=config.momentum, **common)

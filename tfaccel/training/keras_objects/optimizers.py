"""Builds the Keras optimizer and learning-rate schedule from the optimizer section."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from tfaccel.config.keras_names import (
    EMA_REFUSED_BECAUSE,
    OPTIMIZER_SHORTCUTS,
    OWN_OPTIMIZER_ARGUMENTS,
    OWN_SCHEDULES,
    is_callable_spec,
)
from tfaccel.config.recipe import OptimizerConfig
from tfaccel.errors import UserInputError
from tfaccel.training.keras_objects.arguments import (
    accepted_arguments,
    call_checked,
    check_arguments,
)
from tfaccel.training.keras_objects.keras_classes import live_class, recorded_class
from tfaccel.training.keras_objects.user_code import import_callable


@dataclasses.dataclass(frozen=True)
class _Target:
    """A class or factory to call, with the keyword arguments the recipe gives it."""

    build: Callable
    kwargs: dict
    what: str  # as messages name it


def check_optimizer(config: OptimizerConfig, *, load: Optional[Callable] = None) -> None:
    """Checks the optimizer's and schedule's arguments against their signatures.

    Run when training starts, before the data is built: imports each ``module:callable``.

    Args:
        config: The recipe's optimizer section.
        load: Instead of importing, how to get a ``module:callable``'s stand-in
            (`tfaccel validate`: `python_refs.read_signature`, None where the source does
            not show it); Keras' own classes are then checked against their signatures
            recorded in `tfaccel.config.keras_signatures` (no Keras import).

    Raises:
        UserInputError: An unknown or missing argument, a shortcut key (``momentum``) the
            optimizer does not take; the message names the recipe key.
    """
    if load is None:
        _optimizer_target(config)
        _schedule_target(config)
        return
    _optimizer_target(config, load=load, find_class=recorded_class)
    _schedule_target(config, load=load, find_class=recorded_class)


def make_optimizer(config: OptimizerConfig, *, total_steps: int, steps_per_epoch: int):
    """Returns a Keras optimizer for `config`.

    Args:
        config: The recipe's optimizer section.
        total_steps: Optimizer steps in the whole run (for the cosine schedule).
        steps_per_epoch: Optimizer steps per epoch (for warm-up given in epochs).

    Returns:
        A `keras.optimizers.Optimizer`.

    Raises:
        UserInputError: As `check_optimizer`, Keras refused an argument's value, or the
            optimizer averages its weights (`use_ema`: the logs would not describe the
            saved model).
    """
    # Deferred: Keras (seconds); validate imports this module TF-free for its checks.
    import keras

    target = _optimizer_target(config)
    learning_rate = make_learning_rate(config, total_steps=total_steps,
                                       steps_per_epoch=steps_per_epoch)
    optimizer = call_checked(target.build, {"learning_rate": learning_rate, **target.kwargs},
                             key="optimizer", what=target.what)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise UserInputError(f"optimizer.name: {config.name!r} returned a "
                             f"{type(optimizer).__name__}, not a Keras optimizer.")
    if getattr(optimizer, "use_ema", False):
        # What recipe loading refuses as optimizer.params.use_ema, from a module:callable.
        raise UserInputError(
            f"optimizer.name: {config.name!r} returned an optimizer with use_ema=True, but "
            f"{EMA_REFUSED_BECAUSE} Return an optimizer without use_ema; weight averaging "
            "is not supported by tfaccel runs.")
    return optimizer


def make_learning_rate(config: OptimizerConfig, *, total_steps: int, steps_per_epoch: int):
    """The optimizer's learning rate: a number (constant) or a Keras schedule.

    Args:
        config: The recipe's optimizer section.
        total_steps: Optimizer steps in the whole run (for the cosine schedule).
        steps_per_epoch: Optimizer steps per epoch (for warm-up given in epochs).
    """
    # Deferred: Keras (seconds); validate imports this module TF-free for its checks.
    import keras

    if config.schedule == "constant":
        return config.learning_rate
    if config.schedule == "cosine":
        warmup_steps = int(round(config.warmup_epochs * steps_per_epoch))
        decay_steps = max(1, total_steps - warmup_steps)
        if warmup_steps:
            return keras.optimizers.schedules.CosineDecay(
                initial_learning_rate=0.0, decay_steps=decay_steps,
                warmup_target=config.learning_rate, warmup_steps=warmup_steps)
        return keras.optimizers.schedules.CosineDecay(
            initial_learning_rate=config.learning_rate, decay_steps=decay_steps)
    target = _schedule_target(config)
    schedule = call_checked(target.build, target.kwargs, key="optimizer.schedule_params",
                            what=target.what)
    if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        raise UserInputError(f"optimizer.schedule: {config.schedule!r} returned a "
                             f"{type(schedule).__name__}, not a Keras LearningRateSchedule.")
    return schedule


def _optimizer_target(config: OptimizerConfig, *, load: Callable = import_callable,
                      find_class: Callable = live_class) -> Optional[_Target]:
    if is_callable_spec(config.name):
        build = load(config.name, key="optimizer.name")
        if build is None:
            return None
        what, strict = f"optimizer {config.name!r}", False
    else:
        build = find_class("optimizer", config.name)
        what, strict = f"Keras optimizer {config.name!r} ({build.__name__})", True
    names, takes_any = accepted_arguments(build)
    # A shortcut is passed only when set (momentum 0 means unset): the optimizer's own
    # default applies otherwise (muon's momentum is 0.95, adamw's weight_decay 0.004).
    shortcuts = {"momentum": config.momentum or None, "weight_decay": config.weight_decay,
                 "clipnorm": config.clipnorm}
    kwargs = {}
    for name, value in shortcuts.items():
        if value is None:
            continue
        if name not in names and (strict or not takes_any):
            raise UserInputError(
                f"optimizer.{name} is {value} but {what} takes no {name} argument; leave "
                f"optimizer.{name} out{_instead(name, names)}.")
        kwargs[name] = value
    check_arguments(build, config.params, key="optimizer.params", what=what,
                    given=("learning_rate",), strict=strict,
                    elsewhere=OPTIMIZER_SHORTCUTS + tuple(OWN_OPTIMIZER_ARGUMENTS))
    return _Target(build=build, kwargs={**kwargs, **config.params}, what=what)


def _instead(shortcut: str, names: list) -> str:
    # Adam's family calls its momentum beta_1: say so rather than leave the user guessing.
    if shortcut == "momentum" and "beta_1" in names:
        return " (its momentum is beta_1: set optimizer.params.beta_1)"
    return ""


def _schedule_target(config: OptimizerConfig, *, load: Callable = import_callable,
                     find_class: Callable = live_class) -> Optional[_Target]:
    if config.schedule in OWN_SCHEDULES:
        return None
    if is_callable_spec(config.schedule):
        build = load(config.schedule, key="optimizer.schedule")
        if build is None:
            return None
        what, strict = f"schedule {config.schedule!r}", False
    else:
        build = find_class("schedule", config.schedule)
        what, strict = f"Keras schedule {config.schedule}", True
    names, _ = accepted_arguments(build)
    kwargs = dict(config.schedule_params)
    if "initial_learning_rate" in names:
        kwargs["initial_learning_rate"] = config.learning_rate
    check_arguments(build, config.schedule_params, key="optimizer.schedule_params", what=what,
                    given=tuple(kwargs), strict=strict)
    return _Target(build=build, kwargs=kwargs, what=what)

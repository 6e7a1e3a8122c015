"""The process state a run sets, in one place, and put back when it ends.

`train` and `tfaccel doctor` open their run through `open_session`: the same thread pools,
seed, op determinism, precision policy, strategy and batch plan, the training input built
the same way, and everything process-wide left as it was found afterwards (library users
share the process: a notebook that trains twice, a test suite).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from typing import Callable, Iterator, Optional

import keras
import numpy as np
import tensorflow as tf

from tfaccel.config.batching import BatchPlan, plan_batches
from tfaccel.config.cluster import is_multi_worker
from tfaccel.config.recipe import Recipe
from tfaccel.engine.determinism import op_determinism_enabled, set_op_determinism
from tfaccel.engine.devices import check_devices
from tfaccel.engine.model_split import pipeline_devices
from tfaccel.engine.precision import auto_choice, set_precision
from tfaccel.engine.strategy import describe_strategy, make_strategy
from tfaccel.engine.threads import configure_threads, thread_settings
from tfaccel.training.model_setup.inputs import build_data, input_order_is_fixed

# The strategies that place work on runtime.devices (the others refuse the key).
DEVICE_STRATEGIES = ("one_device", "mirrored", "pipeline")


@dataclasses.dataclass
class Session:
    """What one run decided once: its strategy, precision, threads and batch plan.

    Attributes:
        recipe: The validated recipe the session was opened with.
        strategy: The `tf.distribute` strategy; models and data are built in its scope.
        strategy_info: `describe_strategy`'s dict (``strategy``, ``replicas``, ``devices``).
        precision: The Keras policy in force (``auto`` resolved).
        precision_choice: Why ``auto`` resolved so (``{"policy", "reason", ...}``), or
            None when the recipe named a policy.
        threads: `configure_threads`' report of the thread pools in force.
        plan: The recipe's batch plan for this strategy's replicas.
    """

    recipe: Recipe
    strategy: object
    strategy_info: dict
    precision: str
    threads: dict
    plan: BatchPlan
    precision_choice: Optional[dict] = None

    @property
    def replicas(self) -> int:
        """Replicas of the strategy, the devices one step runs on."""
        return self.strategy.num_replicas_in_sync

    def build_data(self, *, recipe: Optional[Recipe] = None, plan: Optional[BatchPlan] = None):
        """The training input (`training.inputs.build_data`), in the strategy's scope.

        The data layer shards by the strategy in scope, and its element order follows
        `runtime.deterministic` and the strategy (`input_order_is_fixed`), as in `train`.

        Args:
            recipe: Another recipe than the session's (a tried suggestion); same strategy.
            plan: Another batch plan than the session's.

        Returns:
            The `TrainData`.
        """

        recipe = recipe or self.recipe
        with self.strategy.scope():
            return build_data(recipe, plan or self.plan, strategy=self.strategy,
                              deterministic=input_order_is_fixed(
                                  deterministic=recipe.runtime.deterministic,
                                  strategy=self.strategy))


@contextlib.contextmanager
def open_session(recipe: Recipe, *, precision: Optional[str] = None,
                 around_strategy: Optional[Callable] = None) -> Iterator[Session]:
    """Sets the process state `recipe` asks for; puts it back on leaving, failed or not.

    Set, in this order: TensorFlow's thread pools (before anything initialises its
    devices), the seed of Python, NumPy, TensorFlow and Keras, op determinism when
    `runtime.deterministic`, the strategy and the Keras precision policy.

    Put back: the precision policy, op determinism, Python's and NumPy's random states,
    and the thread settings while TensorFlow still allows them to change (its pools are
    fixed for the process once its runtime has started, so a run that started it keeps
    them). TensorFlow's and Keras' global seeds stay at the recipe's seed: TensorFlow has
    no public way to read the previous one.

    Args:
        recipe: The validated recipe.
        precision: The policy `runtime.precision: auto` chose when the run started (a
            resumed run keeps it: a timed choice may differ on another day); None decides.
        around_strategy: A context manager factory entered around the strategy's creation,
            where a cluster's workers wait for each other (`train` answers signals there).

    Yields:
        The `Session`.
    """

    runtime = recipe.runtime
    previous_threads = thread_settings()
    threads = configure_threads(intra_op=runtime.intra_op_threads,
                                inter_op=runtime.inter_op_threads)

    previous_random = random.getstate(), np.random.get_state()
    keras.utils.set_random_seed(recipe.seed)
    previous_determinism = op_determinism_enabled()
    if runtime.deterministic:
        set_op_determinism(True)
    previous_policy = keras.mixed_precision.global_policy().name
    try:
        if runtime.strategy in DEVICE_STRATEGIES:
            # Before any strategy exists: one on absent devices hangs in its first step.
            check_devices(runtime.devices, key="runtime.devices")
        with around_strategy() if around_strategy is not None else contextlib.nullcontext():
            strategy = make_strategy(runtime.strategy, devices=runtime.devices,
                                     peer_timeout=runtime.peer_timeout)
        info = describe_strategy(strategy)
        if runtime.strategy == "pipeline":  # one replica; the stages place themselves

            info = {**info, "strategy": "pipeline", "devices": pipeline_devices(runtime.devices)}
        choice = None
        if runtime.precision == "auto":
            # Several workers each timing their own machine could disagree: flags decide.
            choice = auto_choice(measure=not is_multi_worker(strategy)) \
                if precision is None else {
                "policy": precision, "reason": "chosen when the run started"}
        precision = set_precision(runtime.precision if choice is None else choice["policy"])
        training = recipe.training
        plan = plan_batches(global_batch_size=training.global_batch_size,
                            replicas=strategy.num_replicas_in_sync,
                            accumulation_steps=training.accumulation_steps,
                            micro_batch_size=training.micro_batch_size)
        yield Session(recipe=recipe, strategy=strategy, strategy_info=info,
                      precision=precision, threads=threads, plan=plan,
                      precision_choice=choice)
    finally:
        # Process-global, all of it: leave it as we found it for library users.
        keras.mixed_precision.set_global_policy(previous_policy)
        if op_determinism_enabled() != previous_determinism:
            set_op_determinism(previous_determinism)
        random.setstate(previous_random[0])
        np.random.set_state(previous_random[1])
        _restore_threads(previous_threads)


def _restore_threads(previous: dict) -> None:

    setters = {"intra_op": tf.config.threading.set_intra_op_parallelism_threads,
               "inter_op": tf.config.threading.set_inter_op_parallelism_threads}

    current = thread_settings()
    for name, value in previous.items():
        if current[name] == value:
            continue
        try:
            setters[name](value)
        except RuntimeError:
            # TensorFlow started its runtime during the run: the pools are fixed for the
            # rest of the process, whatever is set now.
            pass

"""The recipe's cross-key checks: what one key allows of another, said before TensorFlow starts."""

from __future__ import annotations

import dataclasses
import importlib.util

from tfaccel import python_refs
from tfaccel.config import input_paths, keras_names, sources
from tfaccel.config.batching import check_steps_per_execution, plan_batches
from tfaccel.config.sections import (
    DECODE_AUGMENTATIONS,
    DEFAULT_MODEL,
    DataConfig,
    ModelConfig,
    PipelineConfig,
    Recipe,
    RuntimeConfig,
    TextConfig,
    TrainingConfig,
)
from tfaccel.errors import RecipeError, UserInputError
from tfaccel.models.registry import check_params

SERVICE_ISSUE = "tensorflow/tensorflow#50252"


def check_recipe(recipe: Recipe, *, source: str, own_model: bool = False) -> None:
    """Checks what one key of a typed recipe allows of another (keys and types are checked).

    The data source's own rules (data.path, required keys, compressions, augmentations,
    named splits) come from its entry in `tfaccel.config.sources`.

    Args:
        recipe: The recipe, its keys converted and in range.
        source: The recipe's name for messages (its file path).
        own_model: As in `load_recipe`: model.params are checked when the builder is called.

    Raises:
        RecipeError: Two keys disagree, or a key the data source needs is missing.
    """
    _check_data(recipe.data, source=source)
    training = recipe.training
    # The batch plan's one check (tfaccel.config.batching), run here for one replica: what the
    # recipe alone decides; the replica count is checked again when it is known.
    try:
        plan_batches(global_batch_size=training.global_batch_size, replicas=1,
                     accumulation_steps=training.accumulation_steps,
                     micro_batch_size=training.micro_batch_size)
    except UserInputError as error:
        raise RecipeError(f"{source}: training: {error}") from None
    _check_steps_per_execution(training, source=source)
    _check_auto_micro_batch(recipe, source=source)
    _check_model_params(recipe.model, source=source, own_model=own_model)
    _check_service(recipe, source=source)
    _check_pipeline(recipe.runtime, source=source)
    _check_devices(recipe.runtime, source=source)
    _check_tokenizer(recipe.data.text, source=source)
    keras_names.check_keras_names(recipe.optimizer, recipe.training, source=source)


def _check_data(data: DataConfig, *, source: str) -> None:
    entry = sources.entry(data.source)
    if entry.path != "none" and not data.path:
        raise RecipeError(f"{source}: data.path is required when data.source is "
                          f"{data.source!r}.")
    _check_named_splits(data, source=source)
    for key in sorted({key for other in sources.TABLE for key in other.own_keys}):
        if getattr(data, key) and key not in entry.own_keys:
            raise RecipeError(
                f"{source}: data.{key} is read by data.source "
                f"{' or '.join(sources.own_key_readers(key))} only, not {data.source!r}; "
                f"{sources.OWN_KEY_INSTEAD.get(key, f'leave data.{key} empty')}.")
    if data.validation_path and data.validation_fraction:
        raise RecipeError(f"{source}: data.validation_path and data.validation_fraction both "
                          "name the validation split: set one of them.")
    for key, what in entry.required:
        value = _dotted(data, key)
        if value is None or value in ("", {}, []):
            raise RecipeError(f"{source}: {key} ({what}) is required when data.source is "
                              f"{data.source!r}.")
    if data.compression and data.compression not in entry.compressions:
        # Refused here, without TensorFlow, not when the files are first read.
        takes = entry.compressions
        raise RecipeError(
            f"{source}: data.compression {data.compression!r} is not read by data.source "
            f"{data.source!r}: " + (f"it takes {' or '.join(takes)} (or empty)." if takes
                                    else "leave data.compression empty."))
    if data.augment and entry.augment == "none":
        raise RecipeError(f"{source}: data.augment {data.augment[0]} is an image "
                          f"augmentation: not with data.source {data.source!r}; leave "
                          "data.augment empty.")
    series = data.timeseries
    if series.horizon is not None and series.target_offset:
        raise RecipeError(
            f"{source}: data.timeseries.horizon ({series.horizon}: the next rows after each "
            f"window) and data.timeseries.target_offset ({series.target_offset}: one row) both "
            "place the target: set one of them (one value H rows after the window's last row "
            "is target_offset: (sequence_length - 1) * sampling_rate + H).")
    if data.image_size is not None:
        if len(data.image_size) != 2 or any(s < 1 for s in data.image_size):
            raise RecipeError(f"{source}: data.image_size must be [height, width] with "
                              f"positive sizes, got {data.image_size!r}.")
    decoded = [a for a in data.augment if a in DECODE_AUGMENTATIONS]
    if decoded and entry.augment != "decode":
        takers = " or ".join(e.name for e in sources.TABLE if e.augment == "decode")
        raise RecipeError(f"{source}: data.augment {decoded[0]} crops each image file as it "
                          f"is decoded: only with data.source {takers} (got "
                          f"{data.source!r}); use crop for a random crop of decoded images.")


def _dotted(data: DataConfig, key: str):
    """The value of a dotted data key (``data.timeseries.sequence_length``) of `data`."""
    value = data
    for name in key.split(".")[1:]:
        value = getattr(value, name)
    return value


def _check_named_splits(data: DataConfig, *, source: str) -> None:
    # A split name on a source that has none was read past: `validation_split_name: val` on an
    # image folder trained without validation, silently. The defaults stay accepted: a
    # run's resolved recipe.yaml holds every key.
    named = sources.with_split("named")
    if data.source in named:
        return
    defaults = {f.name: f.default for f in dataclasses.fields(DataConfig)}
    for key in ("train_split", "validation_split_name"):
        value = getattr(data, key)
        if value not in (defaults[key], None, ""):
            raise RecipeError(
                f"{source}: data.{key} {value!r} names a split, but data.source "
                f"{data.source!r} has no named splits (only {', '.join(named)} "
                "do): it trains on every file of data.path and holds out "
                "data.validation_fraction of them for validation. Remove "
                f"data.{key} and set data.validation_fraction (e.g. 0.2), or point "
                "data.path at the files to train on.")


def parse_dispatcher_address(address: str) -> str:
    """A dispatcher address as TensorFlow takes it: ``grpc://HOST:PORT``.

    Args:
        address: ``grpc://HOST:PORT`` or ``HOST:PORT`` (HOST a name, an IPv4 address or a
            bracketed IPv6 address).

    Returns:
        The address with the ``grpc://`` protocol.

    Raises:
        UserInputError: The address has another protocol, no host, or no valid port.
    """
    text = str(address).strip()
    rest = text
    if "://" in text:
        protocol, rest = text.split("://", 1)
        if protocol != "grpc":
            raise UserInputError(f"the dispatcher address {address!r} uses the protocol "
                                 f"{protocol!r}; the tf.data service speaks grpc only: give "
                                 "grpc://HOST:PORT or HOST:PORT.")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or "/" in rest or " " in rest:
        raise UserInputError(f"the dispatcher address {address!r} is not HOST:PORT (e.g. "
                             "grpc://10.0.0.5:5050 or localhost:5050).")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserInputError(f"the dispatcher address {address!r} has no valid port "
                             f"({port!r}); a port is a number from 1 to 65535.")
    return f"grpc://{host}:{int(port)}"


def _check_steps_per_execution(training: TrainingConfig, *, source: str) -> None:
    """What the recipe alone decides of the steps per call (the runner checks the rest once
    an epoch's steps are known)."""
    steps = training.steps_per_execution
    if steps == "auto":
        return
    try:
        # An epoch's steps are known here only when the recipe sets them.
        check_steps_per_execution(steps, steps_per_epoch=training.steps_per_epoch or steps,
                                  every_steps=training.checkpoint_every_steps)
    except UserInputError as error:
        raise RecipeError(f"{source}: {error}") from None


def _check_tokenizer(text: TextConfig, *, source: str) -> None:
    if text.ngrams > 1 and text.tokenizer != "text_vectorization":
        raise RecipeError(f"{source}: data.text.ngrams {text.ngrams} is an option of "
                          "data.text.tokenizer text_vectorization (Keras' TextVectorization), "
                          f"not {text.tokenizer!r}; leave data.text.ngrams at 1.")
    if text.char_ngrams and text.tokenizer != "text_vectorization":
        raise RecipeError(f"{source}: data.text.char_ngrams {text.char_ngrams} is an option "
                          "of data.text.tokenizer text_vectorization (Keras' "
                          f"TextVectorization), not {text.tokenizer!r}; leave "
                          "data.text.char_ngrams at 0.")
    # find_spec looks for the package without importing it (and so TensorFlow): validation
    # stays fast, and a missing KerasHub is named here rather than as a traceback mid-run.
    if text.tokenizer != "wordpiece" or importlib.util.find_spec("keras_hub") is not None:
        return
    raise RecipeError(
        f"{source}: data.text.tokenizer is 'wordpiece', a KerasHub WordPieceTokenizer, but "
        "KerasHub (the keras_hub package) is not installed in this Python; install it with "
        'pip install "tfaccel[hub]" (or pip install keras-hub), or use data.text.tokenizer: '
        "text_vectorization (Keras' own, nothing to install).")


# Where training.micro_batch_size auto cannot retry a step: the pipeline has micro-batches of
# its own, a parameter-server worker's step is one closure among others, and one worker of
# several that changed its step alone would leave the others waiting in its collectives.
_NO_AUTO_MICRO_BATCH = ("pipeline", "parameter_server", "multi_worker")


def _check_auto_micro_batch(recipe, *, source: str) -> None:
    strategy = recipe.runtime.strategy
    if recipe.training.micro_batch_size == "auto" and strategy in _NO_AUTO_MICRO_BATCH:
        raise RecipeError(
            f"{source}: training.micro_batch_size auto cannot be used with runtime.strategy "
            f"{strategy}: it retries the first step on one machine (one_device, mirrored, "
            "or auto there). Set training.micro_batch_size or training.accumulation_steps "
            "to a number.")


def _check_pipeline(runtime: RuntimeConfig, *, source: str) -> None:
    pipe = runtime.pipeline
    if runtime.strategy != "pipeline" and pipe != PipelineConfig():
        raise RecipeError(f"{source}: runtime.pipeline is set but runtime.strategy is "
                          f"{runtime.strategy!r}; set runtime.strategy: pipeline, or remove "
                          "runtime.pipeline.")
    if pipe.split_at is not None and pipe.stages is not None:
        raise RecipeError(f"{source}: runtime.pipeline.split_at ({pipe.split_at!r}) and "
                          f"runtime.pipeline.stages ({pipe.stages!r}) both choose the stages; "
                          "set one of them.")


def _check_devices(runtime: RuntimeConfig, *, source: str) -> None:
    # Which devices exist is checked when the run starts (it needs TensorFlow); here, what
    # the strategy allows: auto, multi_worker and parameter_server choose their own.
    if runtime.devices is not None and runtime.strategy not in (
            "one_device", "mirrored", "pipeline"):
        raise RecipeError(
            f"{source}: runtime.devices ({', '.join(map(str, runtime.devices))}) is read by "
            "runtime.strategy one_device, mirrored or pipeline only, not "
            f"{runtime.strategy!r} (it uses every device, or TF_CONFIG's cluster); set one "
            "of those strategies, or leave runtime.devices empty.")
    if runtime.devices is not None and not runtime.devices:
        raise RecipeError(f"{source}: runtime.devices is an empty list; name devices (e.g. "
                          "[/gpu:0, /gpu:1]) or leave the key empty for all of them.")
    if runtime.strategy == "one_device" and runtime.devices and len(runtime.devices) != 1:
        raise RecipeError(f"{source}: runtime.strategy one_device takes exactly one device; "
                          f"runtime.devices names {len(runtime.devices)} "
                          f"({', '.join(map(str, runtime.devices))}).")


def _check_service(recipe: Recipe, *, source: str) -> None:
    # What the tf.data service cannot run, said before any server is contacted.
    service, data = recipe.data.service, recipe.data
    if not service.dispatcher:
        if service.job_name:
            raise RecipeError(f"{source}: data.service.job_name ({service.job_name!r}) needs "
                              "data.service.dispatcher (the service's address).")
        return
    try:
        parse_dispatcher_address(service.dispatcher)
    except UserInputError as error:
        raise RecipeError(f"{source}: data.service.dispatcher: {error}") from None
    if sources.entry(data.source).python_elements:
        raise RecipeError(
            f"{source}: data.source {data.source!r} cannot run in a tf.data service "
            f"(data.service.dispatcher is {service.dispatcher!r}): its elements come from "
            "Python code in this process (from_generator / py_function), which TensorFlow "
            f"cannot serialise to the service's workers ({SERVICE_ISSUE}). Write the data "
            "to TFRecords (or an image folder) first, or leave data.service.dispatcher empty.")
    if input_paths.is_file_cache(data.cache):
        raise RecipeError(
            f"{source}: data.cache {data.cache!r} (a file) cannot be used with a tf.data "
            "service: each service worker would write the same cache file. Use memory (each "
            "worker keeps its own) or leave data.cache empty.")
    if recipe.runtime.deterministic:
        raise RecipeError(
            f"{source}: runtime.deterministic cannot hold with a tf.data service "
            f"(data.service.dispatcher is {service.dispatcher!r}): batches arrive in the "
            "order the service's workers finish them. Set runtime.deterministic: false, or "
            "leave data.service.dispatcher empty.")
    if recipe.runtime.strategy == "multi_worker":
        raise RecipeError(
            f"{source}: data.service with runtime.strategy multi_worker is not supported "
            "yet (how the service splits the data among several trainers is not tested); "
            "use one trainer with one_device or mirrored, or leave "
            "data.service.dispatcher empty.")


def _check_model_params(model: ModelConfig, *, source: str, own_model: bool = False) -> None:
    # The check is the one `build_model` runs (the registry is TensorFlow-free at import), so
    # both give the same message for the same mistake.
    if model.path is not None:
        # A saved model is built already: a builder or its parameters would be ignored.
        if model.name != DEFAULT_MODEL or model.params:
            given = f"model.name {model.name!r}" if model.name != DEFAULT_MODEL \
                else f"model.params {model.params!r}"
            raise RecipeError(
                f"{source}: model.path {model.path!r} loads a saved model, and {given} would "
                "build another one: set one of the two (leave model.name and model.params "
                "unset with model.path).")
        if not str(model.path).endswith(".keras"):
            raise RecipeError(f"{source}: model.path must be a .keras file (what model.save "
                              f"and a run's model.keras are), got {model.path!r}.")
        return
    if own_model or python_refs.is_reference(model.name):
        return  # its parameters are checked against the callable's signature when it is built
    try:
        check_params(model.name, model.params)
    except UserInputError as error:
        raise RecipeError(f"{source}: model (name {model.name!r}, params): {error}") from None

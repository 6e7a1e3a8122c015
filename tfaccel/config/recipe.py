"""Recipes: strict YAML -> frozen, typed dataclasses, with `--set` overrides (no TensorFlow)."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml

from tfaccel import python_refs
from tfaccel.config import input_paths, keras_names
from tfaccel.errors import RecipeError, UserInputError, did_you_mean

# The data.compression each source reads (csv: CsvDataset's GZIP only, as from_csv).
COMPRESSIONS = {"tfrecords": ("GZIP", "ZLIB"), "text_lines": ("GZIP", "ZLIB"), "csv": ("GZIP",)}
SOURCES = ("builtin", "tfds", "image_folder", "text_folder", "text_lines", "csv",
           "tfrecords", "arrays", "python", "audio_folder", "timeseries")
# The sources that find their data by name (TFDS); every other one reads data.path.
SOURCES_WITHOUT_PATH = ("builtin", "tfds")
# The sources whose data holds named splits (data.train_split, data.validation_split): TFDS
# datasets and Keras' arrays layout; every other one splits by data.validation_fraction.
SOURCES_WITH_SPLITS = ("builtin", "tfds", "arrays")
# model.name's default: the one value model.path may be given with.
DEFAULT_MODEL = "small_cnn"
AUGMENTATIONS = ("flip", "flip_vertical", "crop", "brightness", "contrast", "rotate90")
# Augmentations made while decoding an image file (data.crops): image_folder only.
DECODE_AUGMENTATIONS = ("random_resized_crop",)


def _key(default: Any = dataclasses.MISSING, help: str = "", *, minimum=None, maximum=None,
         exclusive_minimum=None, exclusive_maximum=None, path: bool = False,
         default_factory: Any = dataclasses.MISSING):
    """Declares a recipe key: its default, its README help and its range checks."""
    metadata = {
        "help": help,
        "minimum": minimum,
        "maximum": maximum,
        "exclusive_minimum": exclusive_minimum,
        "exclusive_maximum": exclusive_maximum,
        # Paths are resolved against the recipe file's folder, not the working directory.
        "path": path,
    }
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


PROCESSING_MODES = ("distributed_epoch", "parallel_epochs")
# data.text.tokenizer's values (TextConfig.tokenizer's Literal lists the same).
TOKENIZERS = ("text_vectorization", "wordpiece")
SERVICE_ISSUE = "tensorflow/tensorflow#50252"


@dataclass(frozen=True)
class ServiceConfig:
    """Sends the training input pipeline to a tf.data service (distributed preprocessing)."""

    dispatcher: Optional[str] = _key(
        None, "tf.data service dispatcher, grpc://HOST:PORT or HOST:PORT (see `tfaccel "
        "data-service`); empty: the input pipeline runs in this process.")
    processing_mode: Literal["distributed_epoch", "parallel_epochs"] = _key(
        "distributed_epoch", "distributed_epoch: each pass of the data goes to one worker, "
        "every example once; parallel_epochs: every worker makes whole passes of its own "
        "(in its own random order).")
    job_name: Optional[str] = _key(
        None, "Share one service job among trainers that give the same name; empty: a job "
        "of this trainer's own.")
    compression: Literal["auto", "snappy", "none"] = _key(
        "auto", "How batches cross the wire: snappy (compressed on the worker, "
        "TensorFlow's default), none, or auto: none when the dispatcher is on this machine "
        "(a loopback address), snappy otherwise.")


@dataclass(frozen=True)
class TextConfig:
    """Texts (a string input feature): token ids and batches of similar length."""

    tokenizer: Literal["text_vectorization", "wordpiece"] = _key(
        "text_vectorization", "text_vectorization (Keras' TextVectorization: lower-cased "
        "words, punctuation stripped) or wordpiece (a KerasHub WordPieceTokenizer: "
        "lower-cased sub-words, punctuation kept as tokens; needs keras-hub, pip install "
        "\"tfaccel[hub]\"). Either is adapted on the training split.")
    max_tokens: int = _key(
        20000, "Vocabulary size of the tokenizer, adapted on the training split (ids 0 "
        "and 1 are padding and out-of-vocabulary); the model's vocab_size follows it.",
        minimum=3)
    ngrams: int = _key(
        1, "text_vectorization: also make a token of every run of 2 to N words (N-grams, "
        "after the words of each text; 1: words only); they share data.text.max_tokens with "
        "the words. Word order for order-free models (text_bag).", minimum=1)
    char_ngrams: int = _key(
        0, "text_vectorization: also make a token of every run of 1 to N characters of "
        "each standardised text, spaces included (after its word tokens; 0: none); they "
        "share data.text.max_tokens with the words. Spelling variants and word pieces for "
        "bag models on short texts (recipes/tweets.yaml).", minimum=0)
    max_length: Optional[int] = _key(
        None, "Keep at most this many tokens of each text; empty: whole texts.", minimum=1)
    batch_by_length: bool = _key(
        True, "Batch texts of similar length together (length-sorted windows after the "
        "shuffle), so each batch is padded to its own longest text, not the dataset's.")


@dataclass(frozen=True)
class AudioConfig:
    """WAV files (source audio_folder): how long each waveform is."""

    output_sequence_length: Optional[int] = _key(
        None, "Cut or zero-pad every waveform to this many samples; empty: each batch is "
        "zero-padded to its own longest waveform (see data.text.batch_by_length).", minimum=1)


@dataclass(frozen=True)
class TableConfig:
    """Table columns (source csv) as the model's one feature vector, by Keras' FeatureSpace."""

    categorical: Optional[list[str]] = _key(
        None, "Integer columns to one-hot as categories (codes); string columns always are. "
        "Other numbers are normalised (mean 0, variance 1 on the training split).")
    ignore: Optional[list[str]] = _key(
        None, "Columns left out of the features (row ids, free text, leaks of the label).")


@dataclass(frozen=True)
class TimeseriesConfig:
    """Windows over the rows of a CSV file (source timeseries), each labelled by one row."""

    sequence_length: Optional[int] = _key(
        None, "Rows (timesteps) in each window; required for source timeseries.", minimum=1)
    sequence_stride: int = _key(1, "Rows between the starts of two windows.", minimum=1)
    sampling_rate: int = _key(1, "Rows between two steps of a window (2: every other row).",
                              minimum=1)
    columns: Optional[list[str]] = _key(
        None, "The data columns (a window's channels); empty: every column but label_key.")
    target_offset: int = _key(
        0, "The label of the window starting at row i is row i + target_offset of label_key "
        "(0: its first row; (sequence_length - 1) * sampling_rate: its last).", minimum=0)


@dataclass(frozen=True)
class DataConfig:
    """Where examples come from and how the tf.data pipeline treats them."""

    source: Literal["builtin", "tfds", "image_folder", "text_folder", "text_lines", "csv",
                    "tfrecords", "arrays", "python", "audio_folder", "timeseries"] = _key(
        "builtin", "builtin (generated, no network), tfds, image_folder, text_folder (a .txt "
        "file per example in class sub-folders), text_lines (text files of one "
        "label<TAB>text example per line), csv (CSV files with a header; label_key names "
        "the label column), tfrecords, arrays (.npz of x/y, or Keras' x_train/y_train/"
        "x_test/y_test), python (a `module:callable` source run in worker processes), "
        "audio_folder (a .wav file per example in class sub-folders) or timeseries (windows "
        "of the rows of one CSV file; label_key names the integer label column).")
    name: Optional[str] = _key(
        None, "TFDS dataset name (source tfds), or the built-in dataset (default tfaccel_shapes).")
    path: Optional[str] = _key(
        None, "image, text or audio folder, text lines, CSV or TFRecord file glob, .npz "
        "file, time series CSV file, or `module:callable` for source python.", path=True)
    data_dir: Optional[str] = _key(
        None, "TFDS data directory (TFDS's own default when empty).", path=True)
    download: bool = _key(
        False, "Let TFDS download and prepare a dataset that is not prepared yet (source tfds).")
    train_split: str = _key(
        "train", "Split used for training (TFDS split syntax allowed; arrays: x_train/"
        "y_train, or plain x/y; other sources train on every file of data.path).")
    validation_split: Optional[str] = _key(
        "test", "Split used for validation, by name (TFDS split; arrays: x_test/y_test; "
        "other sources have no named splits: use validation_fraction); empty for none. A "
        "held-out fraction is validation_fraction.")
    validation_fraction: float = _key(
        0.0, "Fraction of the training data held out for validation (seeded; every source; "
        "timeseries: the last rows, in time order).",
        minimum=0.0, exclusive_maximum=1.0)
    validation_path: Optional[str] = _key(
        None, "text_lines: the validation file or glob, read whole (a fixed test split, the "
        "same for every seed); instead of validation_fraction.", path=True)
    prepare: Optional[str] = _key(
        None, "The command that writes this recipe's data (e.g. a preparation script); "
        "named in the error when data.path or data.validation_path is missing.")
    image_size: Optional[list[int]] = _key(
        None, "[height, width] images are resized to (image_folder; optional elsewhere).")
    channels: int = _key(3, "Image channels after decoding: 1, 3 or 4.", minimum=1, maximum=4)
    features: Optional[dict[str, Any]] = _key(
        None, "TFRecord feature spec: {name: {dtype, shape, kind: fixed|var|image}}.")
    image_key: Optional[str] = _key(
        None, "Feature holding the input (tfds, tfrecords); empty: the TFDS dataset's own "
        "supervised input (image for tfaccel_shapes, text for tfaccel_phrases), else image.")
    label_key: str = _key("label", "Feature holding the label (tfds, tfrecords), or the "
                          "label column (csv, timeseries).")
    compression: Optional[Literal["GZIP", "ZLIB"]] = _key(
        None, "Compression of the files: GZIP or ZLIB (tfrecords, text_lines), GZIP (csv); "
        "empty: none (text_lines: by each file's extension, .gz or .zz).")
    jpeg_dct_scaling: bool = _key(
        True, "image_folder: decode a JPEG at 1/2, 1/4 or 1/8 scale when image_size is at "
        "most that fraction of it (much less decoding; slightly smoother pixels); false "
        "decodes every JPEG in full. Whole images only: random_resized_crop windows decode "
        "at full scale (measured faster).")
    verify_records: bool = _key(
        True, "Read every TFRecord file once before training, so a truncated file is named "
        "up front; false skips that pass (and, with data.num_classes set, the label pass: "
        "labels are then checked as they stream).")
    cache: Optional[str] = _key(
        "memory", "Cache decoded examples: memory, a file path prefix, or empty for no cache.")
    shuffle_buffer: int = _key(10000, "Shuffle buffer in examples; 0 turns shuffling off.",
                               minimum=0)
    augment: list[Literal["flip", "flip_vertical", "crop", "brightness", "contrast",
                          "rotate90", "random_resized_crop"]] = _key(
        default_factory=list, help="Random augmentations applied after the cache, per epoch; "
        "random_resized_crop (image_folder): a new Inception-style crop of each image every "
        "epoch, decoding only the crop of a JPEG (the cache then holds the files' bytes).")
    num_parallel_calls: Optional[int] = _key(
        None, "Parallel map calls; empty for AUTOTUNE.", minimum=1)
    workers: int = _key(2, "Worker processes (or threads) for source python.", minimum=1)
    worker_mode: Literal["process", "thread"] = _key(
        "process", "process for CPU-heavy Python, thread for I/O-bound Python sources.")
    private_threads: Optional[int] = _key(
        None, "Size of a private tf.data thread pool; empty for the shared pool.", minimum=1)
    ram_budget_mb: Optional[int] = _key(
        None, "RAM budget for tf.data autotuning, in MiB; empty for tf.data's default.",
        minimum=1)
    num_classes: Optional[int] = _key(
        None, "Number of classes for tfrecords, arrays or python sources; empty to infer it "
        "(from class names, or one pass over the labels).", minimum=1)
    service: ServiceConfig = _key(default_factory=ServiceConfig,
                                  help="tf.data service section.")
    text: TextConfig = _key(default_factory=TextConfig,
                            help="Text section (used when the input feature holds strings).")
    audio: AudioConfig = _key(default_factory=AudioConfig,
                              help="Audio section (source audio_folder).")
    timeseries: TimeseriesConfig = _key(default_factory=TimeseriesConfig,
                                        help="Time series section (source timeseries).")
    table: TableConfig = _key(default_factory=TableConfig,
                              help="Table section (source csv): how columns become features.")


def _misread_data_value(key_path: str, value: Any) -> Optional[str]:
    """What a data key's value says the user meant, when it belongs to another key.

    One key per meaning: Keras' ``validation_split=0.1`` is a fraction, the recipe's
    ``data.validation_split`` names a split, and the fraction is ``data.validation_fraction``.
    """
    if (key_path == "data.validation_split" and isinstance(value, (int, float))
            and not isinstance(value, bool)):
        return ("data.validation_split names a split (e.g. test); for a held-out fraction "
                f"use data.validation_fraction: {value}")
    return None


@dataclass(frozen=True)
class ModelConfig:
    """Which model to build (registered or your own), and its parameters."""

    name: str = _key(
        DEFAULT_MODEL, "A registered model (see `tfaccel models`), or your own builder: "
        "module:callable or path/file.py:callable (relative to the recipe's folder), called "
        "with input_shape=, num_classes= and model.params; it returns an uncompiled "
        "keras.Model.")
    params: dict[str, Any] = _key(
        default_factory=dict, help="Builder parameters; unknown names are rejected.")
    path: Optional[str] = _key(
        None, "A saved Keras model (.keras file, relative to the recipe's folder) to continue "
        "training or fine-tune instead of building one; not with another model.name or "
        "model.params.", path=True)


@dataclass(frozen=True)
class OptimizerConfig:
    """The Keras optimizer and its learning-rate schedule."""

    name: str = _key(
        "adam", "A Keras optimizer by its lower-case name (adam, adamw, sgd, "
        "rmsprop, nadam, adamax, adagrad, adadelta, ftrl, lamb, lion, muon, adafactor, "
        "schedulefreeadamw), or a module:callable returning a Keras optimizer.")
    params: dict[str, Any] = _key(
        default_factory=dict, help="The optimizer's own keyword arguments (e.g. {beta_1: "
        "0.8}), checked against its signature; not the keys below.")
    learning_rate: float = _key(1e-3, "Peak learning rate (a schedule's "
                                "initial_learning_rate).", exclusive_minimum=0.0)
    schedule: str = _key(
        "constant", "constant; cosine (decay to zero over the whole run, warm-up in epochs); "
        "a Keras schedule by its class name (CosineDecay, CosineDecayRestarts, "
        "ExponentialDecay, InverseTimeDecay, PiecewiseConstantDecay, PolynomialDecay; steps "
        "are optimizer steps); or a module:callable returning a Keras schedule.")
    schedule_params: dict[str, Any] = _key(
        default_factory=dict, help="The Keras schedule's keyword arguments (e.g. "
        "{decay_steps: 1000, decay_rate: 0.9}), checked against its signature.")
    warmup_epochs: float = _key(0.0, "Linear warm-up length in epochs (cosine schedule).",
                                minimum=0.0)
    momentum: float = _key(0.0, "Momentum, for optimizers that take one (sgd, rmsprop, "
                           "muon); 0: the optimizer's own default.",
                           minimum=0.0, exclusive_maximum=1.0)
    weight_decay: Optional[float] = _key(None, "Decoupled weight decay; empty: the "
                                         "optimizer's own default.", minimum=0.0)
    clipnorm: Optional[float] = _key(None, "Clip each gradient to this norm; empty for none.",
                                     exclusive_minimum=0.0)


@dataclass(frozen=True)
class TrainingConfig:
    """The training loop: batch plan, epochs, loss and metrics, compilation."""

    epochs: int = _key(10, "Number of epochs.", minimum=1)
    global_batch_size: int = _key(
        128, "Examples per optimizer step, over all replicas and micro-batches.", minimum=1)
    accumulation_steps: Optional[int] = _key(
        None, "Micro-batches per optimizer step (gradient accumulation); default 1.", minimum=1)
    micro_batch_size: Optional[int] = _key(
        None, "Per-replica micro-batch; derives accumulation_steps instead (set one of the two).",
        minimum=1)
    steps_per_epoch: Optional[int] = _key(
        None, "Optimizer steps per epoch; empty for one pass over the data.", minimum=1)
    validation_steps: Optional[int] = _key(
        None, "Validation batches per epoch; empty for the whole split.", minimum=1)
    loss: str = _key("sparse_categorical_crossentropy", "A Keras loss name (function or "
                     "class, as keras.losses.get takes it) or a module:callable.")
    loss_params: dict[str, Any] = _key(
        default_factory=dict, help="The loss's keyword arguments (e.g. {from_logits: true, "
        "label_smoothing: 0.1}), checked against its class's signature.")
    metrics: list[Union[str, dict[str, Any]]] = _key(
        default_factory=lambda: ["accuracy"], help="Keras metric names, module:callables, "
        "or {name: ..., params: {...}} mappings with the metric's keyword arguments.")
    jit_compile: bool = _key(False, "Compile the train step with XLA (one device).")
    steps_per_execution: Union[int, Literal["auto"]] = _key(
        "auto", "Train steps run per call into the compiled function (a divisor of the "
        "epoch's steps); auto measures the per-call cost in the first epoch and picks the "
        "smallest divisor that brings it under 2% of a step (1 where it cannot measure).",
        minimum=1)
    checkpoints: bool = _key(True, "Save a resumable checkpoint at the end of every epoch.")
    checkpoint_every_steps: Optional[int] = _key(
        None, "Also save a resumable checkpoint every N optimizer steps; empty for epoch ends "
        "only.", minimum=1)
    checkpoint_every_minutes: Optional[float] = _key(
        None, "Also save a resumable checkpoint when this many minutes passed since the last "
        "one; empty for never.", exclusive_minimum=0.0)
    keep_checkpoints: int = _key(
        3, "How many step checkpoints to keep (the newest); epoch checkpoints are all kept.",
        minimum=1)
    early_stopping_patience: Optional[int] = _key(
        None, "Stop after this many epochs without an improvement of training.monitor; "
        "empty for never.", minimum=1)
    keep: Literal["best", "last"] = _key(
        "best", "What model.keras holds: best, the weights of the epoch with the best "
        "training.monitor (Keras' ModelCheckpoint save_best_only; the last epoch when the "
        "monitor is a val_ metric and there is no validation split), or last, the last "
        "epoch's weights (what Keras' fit leaves).")
    monitor: str = _key(
        "val_loss", "The logged metric that judges the best epoch, for keep: best and early "
        "stopping alike: loss, a training.metrics name, or either with val_; lower or "
        "higher is better as Keras' mode auto infers.")


@dataclass(frozen=True)
class PipelineConfig:
    """Layer-wise model parallelism (runtime.strategy pipeline): stages and micro-batches."""

    split_at: Optional[list[str]] = _key(
        None, "Layers that end a stage (all but the last); empty: split by stages.")
    stages: Optional[int] = _key(
        None, "Stages balanced by parameter count; empty: one per device.", minimum=1)
    micro_batches: int = _key(
        1, "Micro-batches of each batch in flight through the stages.", minimum=1)


@dataclass(frozen=True)
class RuntimeConfig:
    """Where and how the job runs: devices, strategy, precision, threads, outputs."""

    strategy: Literal["auto", "one_device", "mirrored", "multi_worker", "pipeline"] = _key(
        "auto", "auto, one_device, mirrored, multi_worker or pipeline.")
    devices: Optional[list[str]] = _key(
        None, "Devices for one_device, mirrored or pipeline, e.g. [/gpu:0, /gpu:1]; empty for "
        "all.")
    pipeline: PipelineConfig = _key(default_factory=PipelineConfig,
                                    help="Pipeline (model parallel) section.")
    precision: Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"] = _key(
        "auto", "auto picks mixed_float16 on GPUs, mixed_bfloat16 on TPUs and bf16 CPUs, "
        "float32 otherwise.")
    intra_op_threads: int = _key(0, "TensorFlow intra-op threads; 0 for one per core.",
                                 minimum=0)
    inter_op_threads: int = _key(0, "TensorFlow inter-op threads; 0 for TensorFlow's default.",
                                 minimum=0)
    deterministic: bool = _key(
        False, "Reproducible runs: deterministic tf.data order and TF ops (slower).")
    runs_dir: str = _key(
        "runs", "Folder that receives one new run directory per run (relative to the "
        "working directory).")
    tensorboard: bool = _key(True, "Write TensorBoard event files.")
    verbose: Optional[int] = _key(
        None, "Keras fit verbosity: 0 silent, 1 progress bar, 2 one line per epoch; empty: a "
        "progress bar on a terminal, one line per epoch otherwise (a log file, a scheduler).",
        minimum=0, maximum=2)


@dataclass(frozen=True)
class Recipe:
    """A whole training job."""

    name: str = _key("run", "Name of the job; prefixes the run directory.")
    seed: int = _key(0, "Seed of weights, shuffling and augmentation.", minimum=0)
    data: DataConfig = _key(default_factory=DataConfig, help="Data section.")
    model: ModelConfig = _key(default_factory=ModelConfig, help="Model section.")
    optimizer: OptimizerConfig = _key(default_factory=OptimizerConfig, help="Optimizer section.")
    training: TrainingConfig = _key(default_factory=TrainingConfig, help="Training section.")
    runtime: RuntimeConfig = _key(default_factory=RuntimeConfig, help="Runtime section.")


# ---------------------------------------------------------------------------------------
# Loading and validation


def load_recipe(path: str | os.PathLike, overrides: typing.Sequence[str] = (), *,
                own_model: bool = False) -> Recipe:
    """Loads, overrides and validates a recipe file.

    Args:
        path: The YAML recipe file.
        overrides: `key.path=value` strings; values are parsed as YAML and checked like the
            file's own values.
        own_model: The model is `tfaccel.train(model=...)`'s: model.params are its
            builder's, checked against its signature when it is called, not the registry's.

    Returns:
        The validated, frozen `Recipe`, with input paths resolved against the file's folder.

    Raises:
        RecipeError: The file is missing or malformed, or a key or value is invalid.
    """
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"recipe file {str(path)!r} does not exist or is not a file.")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(error, "problem", None) or str(error)
        raise RecipeError(f"{path}: is not valid YAML{where}: {problem}.") from None
    except UnicodeDecodeError:
        raise RecipeError(f"{path}: is not a UTF-8 text file.") from None
    if raw is None:
        raw = {}
    return recipe_from_dict(raw, base_dir=path.parent.resolve(), overrides=overrides,
                            source=str(path), own_model=own_model)


def recipe_from_dict(raw: Any, *, base_dir: str | os.PathLike | None = None,
                     overrides: typing.Sequence[str] = (), source: str = "recipe",
                     own_model: bool = False) -> Recipe:
    """Validates a recipe given as a mapping (as loaded from YAML).

    Args:
        raw: The mapping.
        base_dir: Folder against which relative input paths resolve; the working directory
            when None.
        overrides: `key.path=value` strings applied before validation.
        source: Name used at the start of error messages.
        own_model: As in `load_recipe`.

    Returns:
        The validated `Recipe`.

    Raises:
        RecipeError: A key or value is invalid.
    """
    if not isinstance(raw, dict):
        raise RecipeError(f"{source}: the top level must be a mapping of sections, "
                          f"got {type(raw).__name__}: {raw!r}.")
    raw = apply_overrides(raw, overrides, source=source)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    recipe = _build(Recipe, raw, "", source=source)
    _check_cross_fields(recipe, source=source, own_model=own_model)
    optimizer, training = keras_names.resolve_callable_files(
        recipe.optimizer, recipe.training, lambda spec: _resolve_callable(spec, base))
    recipe = dataclasses.replace(recipe, optimizer=optimizer, training=training)
    specs = [spec for _, spec in keras_names.callable_specs(recipe)]
    if recipe.data.source == "python" and python_refs.is_reference(recipe.data.path):
        specs.append(recipe.data.path)
    if any(python_refs.source_file(spec) is None for spec in specs):
        # An import path `package.module:callable` is looked up in the recipe's folder and
        # the working directory too (appended: installed packages win), for every key.
        python_refs.add_search_dirs([base, Path.cwd()])
    return _resolve_paths(recipe, base)


def apply_overrides(raw: dict, overrides: typing.Sequence[str], *, source: str = "recipe") -> dict:
    """Returns a copy of `raw` with each `a.b.c=value` override set (value parsed as YAML)."""
    result = copy.deepcopy(raw)
    for override in overrides:
        if "=" not in override:
            raise RecipeError(f"--set {override!r}: expected KEY=VALUE, e.g. "
                              "training.epochs=3.")
        dotted, text = override.split("=", 1)
        keys = [k for k in dotted.strip().split(".")]
        if not dotted.strip() or any(not k for k in keys):
            raise RecipeError(f"--set {override!r}: the key {dotted!r} is not a dotted key "
                              "path such as training.epochs.")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            raise RecipeError(f"--set {override!r}: the value {text!r} is not valid YAML."
                              ) from None
        _check_override_path(keys, override)
        node = result
        for depth, key in enumerate(keys[:-1]):
            child = node.get(key)
            if child is None:
                child = node[key] = {}
            elif not isinstance(child, dict):
                raise RecipeError(f"--set {override!r}: {'.'.join(keys[:depth + 1])} is not a "
                                  "section.")
            node = child
        node[keys[-1]] = value
    return result


def _check_override_path(keys: list[str], override: str) -> None:
    # Catch a misspelt key at the override itself, so the message names the --set.
    cls: Any = Recipe
    for depth, key in enumerate(keys):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            return  # inside a free-form mapping such as model.params
        names = [f.name for f in dataclasses.fields(cls)]
        if key not in names:
            prefix = ".".join(keys[:depth])
            raise RecipeError(f"--set {override!r}: unknown key "
                              f"{_join(prefix, key)!r}{did_you_mean(key, names)}.")
        cls = typing.get_type_hints(cls)[key]


def recipe_to_dict(recipe: Recipe) -> dict:
    """The recipe as plain data, every key present, ready for `yaml.safe_dump`."""
    return dataclasses.asdict(recipe)


def dump_recipe(recipe: Recipe) -> str:
    """The resolved recipe as YAML text (every key, defaults included)."""
    return yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False, default_flow_style=None)


def describe_keys() -> list[tuple[str, str, str]]:
    """Every recipe key as (dotted path, default as YAML, help), in declaration order."""
    return _describe_section(Recipe, "")


def mapping_keys() -> tuple[str, ...]:
    """The recipe keys whose value is a mapping of its own (``data.features``,
    ``model.params``): one setting each, not sections to walk into."""
    return tuple(key for key, hint in _key_hints(Recipe, "")
                 if dict in (typing.get_origin(hint), *map(typing.get_origin,
                                                           typing.get_args(hint))))


def flatten_recipe(raw: typing.Mapping, *,
                   whole: typing.Collection[str] | None = None) -> dict[str, Any]:
    """THE dotted view of a recipe: ``{"training.epochs": 10, "model.params": {...}, ...}``.

    Sections are walked into; the keys in `whole` are kept as one value each, so a
    recipe's flat keys are exactly the keys `describe_keys` lists. An empty mapping is kept
    as a value too (a key never vanishes). `tfaccel train --resume` compares recipes key by
    key with it, and `tfaccel compare` shows the keys whose values differ.

    Args:
        raw: A recipe as plain data: `recipe_to_dict`'s, or a recipe.yaml as loaded.
        whole: Dotted keys not to walk into; None means `mapping_keys()`.

    Returns:
        The settings by dotted key, in the recipe's order.
    """
    if not isinstance(raw, typing.Mapping):
        raise UserInputError(f"flatten_recipe: raw must be a mapping (a recipe as plain "
                             f"data), got {_describe(raw)}.")
    whole = frozenset(mapping_keys() if whole is None else whole)
    flat: dict[str, Any] = {}

    def walk(mapping: typing.Mapping, prefix: str) -> None:
        for key, value in mapping.items():
            key_path = _join(prefix, str(key))
            if isinstance(value, typing.Mapping) and value and key_path not in whole:
                walk(value, key_path)
            else:
                flat[key_path] = value

    walk(raw, "")
    return flat


def _leaf_fields(cls, prefix: str):
    """Yields ``(dotted path, field, type hint)`` of every recipe key under `cls`, in order."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key_path = _join(prefix, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _leaf_fields(hints[f.name], key_path)
        else:
            yield key_path, f, hints[f.name]


def _key_hints(cls, prefix: str) -> list[tuple[str, Any]]:
    """Every recipe key under `cls` as (dotted path, type hint), in declaration order."""
    return [(key_path, hint) for key_path, _, hint in _leaf_fields(cls, prefix)]


def _describe_section(cls, prefix: str) -> list[tuple[str, str, str]]:
    return [(key_path, _yaml_scalar(_default_of(f)), f.metadata.get("help", ""))
            for key_path, f, _ in _leaf_fields(cls, prefix)]


# ---------------------------------------------------------------------------------------
# Internals


def _build(cls, raw: Any, prefix: str, *, source: str):
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError(f"{source}: {prefix or 'the top level'} must be a mapping, got "
                          f"{_describe(raw)}.")
    fields_by_name = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if not isinstance(key, str) or key not in fields_by_name:
            raise RecipeError(f"{source}: unknown key {_join(prefix, str(key))!r}"
                              f"{did_you_mean(str(key), list(fields_by_name))}.")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields_by_name.items():
        key_path = _join(prefix, name)
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = _build(hint, raw.get(name), key_path, source=source)
            continue
        if name not in raw:
            continue  # the dataclass default applies
        meant = _misread_data_value(key_path, raw[name])
        if meant:
            raise RecipeError(f"{source}: {meant} (got {_describe(raw[name])}).")
        value = _convert(raw[name], hint, key_path, source=source)
        _check_range(value, f.metadata, key_path, source=source)
        values[name] = value
    return cls(**values)


def _convert(value: Any, hint: Any, key_path: str, *, source: str):
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)

    def fail(expected: str):
        raise RecipeError(f"{source}: {key_path} must be {expected}, got {_describe(value)}.")

    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if value is None or value == "":
            if type(None) in args:
                return None
        if len(non_none) == 1:
            return _convert(value, non_none[0], key_path, source=source)
        for option in non_none:  # the first type that takes the value (int before "auto")
            try:
                return _convert(value, option, key_path, source=source)
            except RecipeError:
                continue
        fail(" or ".join(_type_name(a) for a in non_none))
    if origin is Literal:
        if value not in args:
            choices = ", ".join(str(a) for a in args)
            hint_text = did_you_mean(str(value), [str(a) for a in args])
            raise RecipeError(f"{source}: {key_path} must be one of {choices}; got "
                              f"{_describe(value)}{hint_text}.")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            fail("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail("an integer")
        return value
    if hint is float:
        if isinstance(value, bool):
            fail("a number")
        if isinstance(value, (int, float)):
            return float(value)
        # PyYAML reads YAML 1.1, where `1e-3` (no dot) is a string: accept numeric text.
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        fail("a number")
    if hint is str:
        if not isinstance(value, str):
            fail("a string")
        return value
    if origin is list:
        if not isinstance(value, list):
            fail(f"a list of {_type_name(args[0])}")
        return [_convert(item, args[0], f"{key_path}[{i}]", source=source)
                for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            fail("a mapping")
        return copy.deepcopy(value)
    if hint is Any:
        return value
    raise TypeError(f"unsupported recipe type {hint!r} at {key_path}")  # a bug, not a user error


def _check_range(value: Any, metadata: dict, key_path: str, *, source: str) -> None:
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        bounds = [
            ("minimum", lambda v, b: v >= b, ">="),
            ("maximum", lambda v, b: v <= b, "<="),
            ("exclusive_minimum", lambda v, b: v > b, ">"),
            ("exclusive_maximum", lambda v, b: v < b, "<"),
        ]
        for name, ok, symbol in bounds:
            bound = metadata.get(name)
            if bound is not None and not ok(item, bound):
                raise RecipeError(f"{source}: {key_path} must be {symbol} {bound}, got "
                                  f"{item!r}.")


def _check_cross_fields(recipe: Recipe, *, source: str, own_model: bool = False) -> None:
    data, training = recipe.data, recipe.training
    if data.source not in SOURCES_WITHOUT_PATH and not data.path:
        raise RecipeError(f"{source}: data.path is required when data.source is "
                          f"{data.source!r}.")
    _check_named_splits(data, source=source)
    if data.validation_path and data.source != "text_lines":
        raise RecipeError(f"{source}: data.validation_path is read by data.source text_lines "
                          f"only, not {data.source!r}; use data.validation_fraction.")
    if data.validation_path and data.validation_fraction:
        raise RecipeError(f"{source}: data.validation_path and data.validation_fraction both "
                          "name the validation split: set one of them.")
    if data.source == "tfds" and not data.name:
        raise RecipeError(f"{source}: data.name (a TFDS dataset name) is required when "
                          "data.source is 'tfds'.")
    if data.source == "tfrecords" and not data.features:
        raise RecipeError(f"{source}: data.features (the TFRecord feature spec) is required "
                          "when data.source is 'tfrecords'.")
    if data.compression and data.compression not in COMPRESSIONS.get(data.source, ()):
        # Refused here, without TensorFlow, not when the files are first read.
        takes = COMPRESSIONS.get(data.source)
        raise RecipeError(
            f"{source}: data.compression {data.compression!r} is not read by data.source "
            f"{data.source!r}: " + (f"it takes {' or '.join(takes)} (or empty)." if takes
                                    else "leave data.compression empty."))
    if data.source == "timeseries" and data.timeseries.sequence_length is None:
        raise RecipeError(f"{source}: data.timeseries.sequence_length (rows in each window) "
                          "is required when data.source is 'timeseries'.")
    if data.augment and data.source in ("audio_folder", "timeseries"):
        raise RecipeError(f"{source}: data.augment {data.augment[0]} is an image "
                          f"augmentation: not with data.source {data.source!r}; leave "
                          "data.augment empty.")
    if data.image_size is not None:
        if len(data.image_size) != 2 or any(s < 1 for s in data.image_size):
            raise RecipeError(f"{source}: data.image_size must be [height, width] with "
                              f"positive sizes, got {data.image_size!r}.")
    decoded = [a for a in data.augment if a in DECODE_AUGMENTATIONS]
    if decoded and data.source != "image_folder":
        raise RecipeError(f"{source}: data.augment {decoded[0]} crops each image file as it "
                          "is decoded: only with data.source image_folder (got "
                          f"{data.source!r}); use crop for a random crop of decoded images.")
    if data.source == "image_folder" and data.image_size is None:
        raise RecipeError(f"{source}: data.image_size ([height, width]) is required when "
                          "data.source is 'image_folder'.")
    # The batch plan's one check (tfaccel.config.batching), run here for one replica: what the
    # recipe alone decides; the replica count is checked again when it is known.
    from tfaccel.config.batching import plan_batches

    try:
        plan_batches(global_batch_size=training.global_batch_size, replicas=1,
                     accumulation_steps=training.accumulation_steps,
                     micro_batch_size=training.micro_batch_size)
    except UserInputError as error:
        raise RecipeError(f"{source}: training: {error}") from None
    _check_steps_per_execution(training, source=source)
    _check_model_params(recipe.model, source=source, own_model=own_model)
    _check_service(recipe, source=source)
    _check_pipeline(recipe.runtime, source=source)
    _check_tokenizer(recipe.data.text, source=source)
    keras_names.check_keras_names(recipe.optimizer, recipe.training, source=source)


def _check_named_splits(data: DataConfig, *, source: str) -> None:
    # A split name on a source that has none was read past: `validation_split: val` on an
    # image folder trained without validation, silently. The defaults stay accepted: a
    # run's resolved recipe.yaml holds every key.
    if data.source in SOURCES_WITH_SPLITS:
        return
    defaults = {f.name: f.default for f in dataclasses.fields(DataConfig)}
    for key in ("train_split", "validation_split"):
        value = getattr(data, key)
        if value not in (defaults[key], None, ""):
            raise RecipeError(
                f"{source}: data.{key} {value!r} names a split, but data.source "
                f"{data.source!r} has no named splits (only {', '.join(SOURCES_WITH_SPLITS)} "
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
    from tfaccel.config.batching import check_steps_per_execution

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
    if data.source == "python":
        raise RecipeError(
            f"{source}: data.source 'python' cannot run in a tf.data service "
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
    # The registry is TensorFlow-free at import, so `validate` stays fast; the check is the
    # one `build_model` runs, so both give the same message for the same mistake.
    from tfaccel import models

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
        models.check_params(model.name, model.params)
    except UserInputError as error:
        raise RecipeError(f"{source}: model (name {model.name!r}, params): {error}") from None


def _resolve_paths(recipe: Recipe, base_dir: Path) -> Recipe:
    # Input paths are relative to the recipe file, so a recipe runs the same from any folder.
    data = recipe.data
    changes = {}
    for f in dataclasses.fields(DataConfig):
        value = getattr(data, f.name)
        if not f.metadata.get("path") or not value:
            continue
        if f.name == "path" and data.source == "python":
            changes[f.name] = _resolve_callable(value, base_dir)
            continue
        changes[f.name] = _resolve_path(value, base_dir)
    return dataclasses.replace(recipe, data=dataclasses.replace(data, **changes),
                               model=_resolve_model_paths(recipe.model, base_dir))


def _resolve_model_paths(model: ModelConfig, base_dir: Path) -> ModelConfig:
    # model.name resolves as a python source's data.path does: a file against the recipe's
    # folder (an import path's search folders: recipe_from_dict).
    changes = {}
    if model.path:
        changes["path"] = _resolve_path(model.path, base_dir)
    changes["name"] = _resolve_callable(model.name, base_dir)
    return dataclasses.replace(model, **changes)


def _resolve_callable(spec, base_dir: Path):
    """THE path rule of a ``file.py:callable`` (data.path, model.name, optimizer, loss,
    metrics): its file against the recipe's folder. A registered or Keras name, or an import
    path ``package.module:callable`` (found through the search folders), is kept as is."""
    if not python_refs.is_reference(spec) or python_refs.source_file(spec) is None:
        return spec
    module, _, attribute = spec.rpartition(":")
    return f"{_resolve_path(module, base_dir)}:{attribute}"


def _resolve_path(value: str, base_dir: Path) -> str:
    if input_paths.is_remote(value):
        return value  # a remote URL such as gs://bucket/...: TensorFlow resolves it
    expanded = os.path.expanduser(value)
    if os.path.isabs(expanded):
        return expanded
    return str((base_dir / expanded).resolve())


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return f"{type(value).__name__} {value!r}"


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(hint))
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint)))


def _default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return "(section)" if dataclasses.is_dataclass(value) else value
    return None


def _yaml_scalar(value: Any) -> str:
    if value == "(section)":
        return ""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()

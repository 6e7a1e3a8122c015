"""The recipe's sections: frozen, typed dataclasses, each key with its default, help and ranges."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from tfaccel.config import sources

DEFAULT_MODEL = "small_cnn"
AUGMENTATIONS = ("flip", "flip_vertical", "crop", "brightness", "contrast", "rotate90")
# Augmentations made while decoding an image file (data.crops): image_folder only.
DECODE_AUGMENTATIONS = ("random_resized_crop",)


def _key(default: Any = dataclasses.MISSING, help: str = "", *, minimum=None, maximum=None,
         exclusive_minimum=None, exclusive_maximum=None, path: bool = False,
         choices=None, default_factory: Any = dataclasses.MISSING):
    """Declares a recipe key: its default, its README help and its range checks.

    `choices` is a function giving the allowed values of a string key at check time (the
    source table's names), where a Literal would freeze them when the class is made.
    """
    metadata = {
        "choices": choices,
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


# Keys that were renamed: {old dotted key: function of the value given -> the paragraph
# that refuses it}. A renamed key is refused with a pointer, never silently ignored.
def _validation_split_renamed(value: Any) -> str:
    # Keras' validation_split is a FRACTION (its loaders, fit); the recipe's key named a
    # split: one name had two meanings, so the recipe's got a name of its own.
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    instead = (f"data.validation_fraction: {value}" if number else
               f"data.validation_split_name: {'null' if value in (None, '') else value}")
    return (f"data.validation_split (got {value!r}) is no longer a recipe key: Keras' "
            "validation_split is a held-out fraction, so a recipe names the validation "
            "split with data.validation_split_name (a TFDS split such as test, or "
            "x_test/y_test of an .npz file) and the held-out fraction with "
            f"data.validation_fraction; write {instead}.")


RENAMED_KEYS = {"data.validation_split": _validation_split_renamed}


PROCESSING_MODES = ("distributed_epoch", "parallel_epochs")
# data.text.tokenizer's values (TextConfig.tokenizer's Literal lists the same).
TOKENIZERS = ("text_vectorization", "wordpiece")


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
    sampling_rate: Optional[int] = _key(
        None, "Resample the files to this rate in Hz (tfaccel.data.resample); empty: the "
        "files' own rate. output_sequence_length counts samples at this rate.", minimum=1)


@dataclass(frozen=True)
class TableConfig:
    """Table columns (source csv) as the model's one feature vector, by Keras' FeatureSpace;
    how the files are read (source csv and timeseries)."""

    categorical: Optional[list[str]] = _key(
        None, "Integer columns to one-hot as categories (codes); string columns always are. "
        "Other numbers are normalised (mean 0, variance 1 on the training split).")
    ignore: Optional[list[str]] = _key(
        None, "Columns left out of the features (row ids, free text, leaks of the label).")
    delimiter: str = _key(
        "auto", "The field separator: auto (detected over the first 64 KB among comma, "
        "semicolon, tab and pipe), or comma, semicolon, tab or pipe (or the character itself).")
    types: Optional[dict[str, str]] = _key(
        None, "Declared column kinds, {column: int|float|string|date|ignore}; other columns "
        "are typed from their whole column (numbers, dates, text).")
    na_values: Optional[list[str]] = _key(
        None, "More missing-value markers, besides empty, NA, N/A, nan, NaN, null, None and ?; "
        "missing numbers are imputed with the training mean plus a 0/1 indicator.")


@dataclass(frozen=True)
class TimeseriesConfig:
    """Windows over the rows of a CSV file (source timeseries), each labelled by one row or
    forecasting the next `horizon` rows."""

    sequence_length: Optional[int] = _key(
        None, "Rows (timesteps) in each window; required for source timeseries.", minimum=1)
    sequence_stride: int = _key(1, "Rows between the starts of two windows.", minimum=1)
    sampling_rate: int = _key(1, "Rows between two steps of a window (2: every other row).",
                              minimum=1)
    columns: Optional[list[str]] = _key(
        None, "The data columns (a window's channels); empty: every column but label_key (with "
        "horizon: every column, the forecast series' own past included).")
    target_offset: int = _key(
        0, "The label of the window starting at row i is row i + target_offset of label_key "
        "(0: its first row; (sequence_length - 1) * sampling_rate: its last).", minimum=0)
    horizon: Optional[int] = _key(
        None, "Forecast: each window's target is the next `horizon` rows of label_key after "
        "its last row, one vector (a regression; a list label_key: each step's columns "
        "together); empty: one label row (target_offset). One value H rows ahead is "
        "target_offset: (sequence_length - 1) * sampling_rate + H.", minimum=1)


@dataclass(frozen=True)
class DataConfig:
    """Where examples come from and how the tf.data pipeline treats them."""

    # The source table's names, read when a recipe is checked (tfaccel.config.sources).
    source: str = _key("builtin", sources.help_text(), choices=sources.names)
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
    validation_split_name: Optional[str] = _key(
        "test", "Split used for validation, by name (TFDS split; arrays: x_test/y_test; "
        "other sources have no named splits: use validation_fraction); empty for none. A "
        "held-out fraction is validation_fraction (Keras' validation_split).")
    validation_fraction: float = _key(
        0.0, "Fraction of the training data held out for validation (seeded; every source; "
        "csv, tfrecords, text_lines: whole files when round(fraction * files) is at least one "
        "file and leaves one, else the rows of all files; timeseries: the last rows, in time "
        "order).",
        minimum=0.0, exclusive_maximum=1.0)
    validation_path: Optional[str] = _key(
        None, "csv, tfrecords, text_lines: the validation file or glob, read whole (a fixed "
        "test split, the same for every seed); instead of validation_fraction.", path=True)
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
    label_key: Union[str, list[str]] = _key(
        "label", "Feature holding the label (tfds, tfrecords), or the label column (csv, "
        "timeseries); a list of columns: several 0/1 labels (multi_label) or several "
        "targets (regression).")
    task: Literal["auto", "classification", "binary", "multi_label", "regression"] = _key(
        "auto", "What the labels ask for: classification (one class per example, integer or "
        "text labels: the classes are the sorted distinct values), binary (two classes, one "
        "sigmoid unit), multi_label (several 0/1 labels per example), regression (one or "
        "several numeric targets; forecasting in source timeseries); auto infers it from "
        "the training labels (fractional numbers: regression; several 0/1 columns: "
        "multi_label; else classification) and the run records it.")
    compression: Optional[Literal[sources.COMPRESSIONS]] = _key(
        None, f"Compression of the files: {sources.compression_help()}; empty: none "
        "(text_lines: by each file's extension, .gz or .zz).")
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
    micro_batch_size: Union[int, Literal["auto"], None] = _key(
        None, "Per-replica micro-batch; derives accumulation_steps instead (set one of the two). "
        "auto: start at the per-replica batch (or accumulation_steps' micro-batch) and, when "
        "a step runs out of device memory before the first optimizer step, halve the "
        "micro-batch and double the accumulation steps (same global batch, same result), "
        "down to 1.", minimum=1)
    steps_per_epoch: Optional[int] = _key(
        None, "Optimizer steps per epoch; empty for one pass over the data.", minimum=1)
    validation_steps: Optional[int] = _key(
        None, "Validation batches per epoch; empty for the whole split.", minimum=1)
    loss: str = _key("auto", "A Keras loss name (function or class, as keras.losses.get "
                     "takes it) or a module:callable; auto: the task's (classification: "
                     "sparse_categorical_crossentropy; binary and multi_label: "
                     "binary_crossentropy; regression: mean_squared_error).")
    loss_params: dict[str, Any] = _key(
        default_factory=dict, help="The loss's keyword arguments (e.g. {from_logits: true, "
        "label_smoothing: 0.1}), checked against its class's signature.")
    metrics: Union[Literal["auto"], list[Union[str, dict[str, Any]]]] = _key(
        "auto", help="Keras metric names, module:callables, or {name: ..., params: {...}} "
        "mappings with the metric's keyword arguments; auto: the task's (classification: "
        "accuracy; binary: accuracy and auc; multi_label: binary_accuracy and auc; "
        "regression: mae and rmse).")
    jit_compile: bool = _key(False, "Compile the train step with XLA (one device).")
    steps_per_execution: Union[int, Literal["auto"]] = _key(
        "auto", "Train steps run per call into the compiled function (a divisor of the "
        "epoch's steps); auto measures the per-call cost in the first epoch and picks the "
        "smallest divisor that brings it under 2% of a step (1 where it cannot measure), "
        "switching only when the rest of the run repays the retrace it needs.",
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
        "stopping alike: loss, a training.metrics name (with metrics auto, the task's: "
        "accuracy, auc, binary_accuracy, mae, rmse), or either with val_; lower or higher "
        "is better as Keras' mode auto infers (val_mae: lower).")


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

    strategy: Literal["auto", "one_device", "mirrored", "multi_worker", "parameter_server",
                      "pipeline"] = _key(
        "auto", "auto, one_device, mirrored, multi_worker, parameter_server (asynchronous, "
        "started by tfaccel launch --ps N --workers M) or pipeline (the model's layers split "
        "over devices, runtime.pipeline).")
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
    min_shard_bytes: Optional[int] = _key(
        262144, "parameter_server: an Embedding table or a Dense kernel that holds at least "
        "twice this many bytes is split into shards of at least this size, at most one per "
        "parameter server (TensorFlow's MinSizePartitioner rule; 256 KiB); empty: nothing "
        "is split.",
        minimum=1)
    peer_timeout: Optional[float] = _key(
        None, "multi_worker: seconds without a heartbeat after which a worker counts as "
        "unreachable and the job stops naming it; parameter_server: seconds of silence "
        "(gRPC keepalive) after which the chief counts a worker as lost (the run carries "
        "on) or a parameter server (the run stops); empty: 10.",
        exclusive_minimum=0)


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

"""What a recipe's data section built: `DatasetInfo`, one frozen field per fact."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple, Union


@dataclasses.dataclass(frozen=True)
class TextInfo:
    """How a text source's strings became token ids (summary.json's ``dataset.text``).

    Attributes:
        tokenizer: ``"text_vectorization"`` or ``"wordpiece"`` (data.text.tokenizer).
        vocabulary_size: Tokens of the adapted vocabulary (the model's `vocab_size`).
        max_length: Tokens kept of each text (data.text.max_length; None: all).
        batch_by_length: Whether texts of similar length are batched together.
        ngrams: data.text.ngrams.
        char_ngrams: data.text.char_ngrams.
    """

    tokenizer: str
    vocabulary_size: int
    max_length: Optional[int]
    batch_by_length: bool
    ngrams: Any
    char_ngrams: Any


@dataclasses.dataclass(frozen=True)
class TableInfo:
    """How a table's columns became one float vector (summary.json's ``dataset.table``).

    Attributes:
        numeric: The columns normalised as numbers (`tfaccel.reading.table_plan`).
        categorical: The columns one-hot encoded.
        ignored: The columns left out (declared, without a value, or id-like).
        features: Length of the feature vector the columns make.
        date: Date columns made calendar features.
        imputed: ``{column: training mean}`` of the numeric columns with missing values
            (each also has a 0/1 ``<column>_missing`` feature).
        line: The plan in one line, as the run says it (not in summary.json).
        notes: One-line remarks on dates and id-like columns (not in summary.json).
    """

    numeric: List[str]
    categorical: List[str]
    ignored: List[str]
    features: int
    date: List[str] = dataclasses.field(default_factory=list)
    imputed: Dict[str, float] = dataclasses.field(default_factory=dict)
    line: str = dataclasses.field(default="", compare=False)
    notes: List[str] = dataclasses.field(default_factory=list, compare=False)


@dataclasses.dataclass(frozen=True)
class SeriesInfo:
    """What a time series' windows read and predict (summary.json's ``dataset.series``).

    Attributes:
        columns: The data columns (a window's channels, in order).
        targets: The label or target columns (data.label_key as a list).
        horizon: Rows forecast after each window (data.timeseries.horizon; None: one
            label row per window).
        anchor: With a horizon over the data's own columns: the data column of each
            target, whose last value in a window a forecast starts from (None: none).
        input_mean: Mean of each data column over the training rows.
        input_std: Standard deviation of each data column over the training rows (a zero
            one taken as 1).
        target_mean: Mean of each target value over the training windows (regression;
            None for classes); with `anchor`, of its change from the anchor's last value.
        target_std: Its standard deviation (as input_std; None for classes).
    """

    columns: List[str]
    targets: List[str]
    horizon: Optional[int]
    anchor: Optional[List[int]]
    input_mean: List[float]
    input_std: List[float]
    target_mean: Optional[List[float]] = None
    target_std: Optional[List[float]] = None


# Fields summary.json shows only when they hold something (the keys the info dict of
# earlier runs had only then), so a summary keeps the same keys as before.
_SHOWN_WHEN_SET = ("text", "table", "series", "worker_sharding", "validation_padding_fraction")
# Fields never written: objects the run itself uses, and the names (summary.class_names).
_NOT_IN_SUMMARY = ("class_names", "vectorizer", "feature_space")


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What `data.from_recipe.build_datasets` built, for the runner, doctor, bench and export.

    Built once, never changed (`dataclasses.replace` makes a variant); an unknown field is
    refused at construction (`TypeError` naming it) and a misspelt attribute raises
    `AttributeError`, where a dict read by string keys gave None or a `KeyError` far away.
    None in a field means the source does not know it, as each field says.

    Attributes:
        task: What the labels ask for: classification, binary, multi_label or regression
            (`tfaccel.reading.labels`; data.task, or inferred from the labels).
        num_outputs: Width of the model's output: classes (classification), 1 (binary),
            labels (multi_label), targets (regression); None: num_classes.
        num_classes: Classes of the labels (None: the source has no class labels to count,
            e.g. regression targets or a Python source without `data.num_classes`).
        class_names: Names of the classes in label order (None: the source has no names).
        train_examples: Examples in the training split (None: not declared by the source;
            the runner counts one pass).
        validation_examples: Examples in the validation split (None: no validation split,
            or its size is not declared).
        input_shape: One example's features shape (a tuple), or ``{name: shape}`` for
            dict features; None dimensions are open (texts, waveforms).
        steps_per_epoch: Optimizer steps in one pass of the training split (None: the
            source does not declare its size).
        train_examples_per_pass: Examples those steps hold over all workers (None: as
            `steps_per_epoch`).
        data_service: The tf.data service the training input goes to, as
            ``{"dispatcher", "processing_mode", "job_name"}`` (None: made in this process).
        text: How texts became token ids (None: not a text source, or `raw`).
        table: How a table's columns became features (None: not a table, or `raw`).
        series: What a time series' windows read and predict, with the training split's
            statistics a model normalises with (None: not a time series source).
        vectorizer: The adapted text layer (None: as `text`); never in summary.json.
        feature_space: The adapted Keras FeatureSpace (None: as `table`); never in
            summary.json.
        worker_sharding: ``"file"`` or ``"element"``: how a multi-worker job splits the
            training input (None: one worker).
        validation_padding_fraction: Share of the validation batches' steps that are
            padding (None: not measured; the runner measures it for open-length inputs).
    """

    task: str = "classification"
    num_outputs: Optional[int] = None
    num_classes: Optional[int] = None
    class_names: Optional[list] = None
    train_examples: Optional[int] = None
    validation_examples: Optional[int] = None
    input_shape: Union[None, Tuple, Dict[str, Tuple]] = None
    steps_per_epoch: Optional[int] = None
    train_examples_per_pass: Optional[int] = None
    data_service: Optional[dict] = None
    text: Optional[TextInfo] = None
    table: Optional[TableInfo] = None
    series: Optional[SeriesInfo] = None
    vectorizer: Any = dataclasses.field(default=None, repr=False, compare=False)
    feature_space: Any = dataclasses.field(default=None, repr=False, compare=False)
    worker_sharding: Optional[str] = None
    validation_padding_fraction: Optional[float] = None

    def summary(self) -> dict:
        """The ``dataset`` section of summary.json: the keys and values runs wrote before.

        Plain data only (no layer objects, `class_names` stand beside it in the summary);
        `text` and `table` as dicts; the fields of `_SHOWN_WHEN_SET` only when set.
        """
        shown = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _NOT_IN_SUMMARY or (field.name in _SHOWN_WHEN_SET
                                                 and value is None):
                continue
            shown[field.name] = (dataclasses.asdict(value) if dataclasses.is_dataclass(value)
                                 else value)
        if isinstance(self.table, TableInfo):
            # The line and notes are said at train time, not recorded twice.
            for said in ("line", "notes"):
                shown["table"].pop(said, None)
        return shown

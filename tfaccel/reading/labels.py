"""THE label rule: what task a source's labels ask for, and how they become model targets.

Labels are read, never counted: the classes are the sorted distinct label values (0..K-1,
1..K, -1/1, strings), mapped to ids 0..K-1, with their names kept for the run and the
exported model, so no class is ever empty. A float target under a classification task is
a clear error naming where the labels come from, never a class count. NumPy only: `tfaccel
validate` and every source (library call or recipe) use the same rule.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

import numpy as np

from tfaccel.errors import DataError

# data.task's values: auto infers one of the others from the labels.
TASKS = ("auto", "classification", "binary", "multi_label", "regression")
# What each task's model ends with, for messages and docs.
TASK_HEADS = {
    "classification": "a softmax over the K classes (sparse categorical cross-entropy)",
    "binary": "one sigmoid unit (binary cross-entropy)",
    "multi_label": "one sigmoid unit per label (binary cross-entropy each)",
    "regression": "one linear unit per target (mean squared error)",
}
# Integer labels with more distinct values than this, and more than half as many distinct
# values as examples, look like a quantity (a count, an age, a price in cents), not classes:
# auto refuses to guess and asks for data.task.
_MANY_CLASSES = 100


@dataclasses.dataclass(frozen=True)
class LabelPlan:
    """What a source's labels are, decided once on the training labels.

    Attributes:
        task: One of `TASKS` but auto: classification, binary, multi_label or regression.
        class_names: classification/binary: the names of the classes in id order (the
            sorted distinct label values, as text); multi_label: the label names (columns);
            regression: the target names (columns), or None when unnamed.
        num_outputs: Width of the model's output: K classes (classification), 1 (binary),
            L labels (multi_label), T targets (regression).
        values: classification/binary: the distinct label values in id order as they
            appear in the data (ints, floats or strings), what `encode` maps; else None.
    """

    task: str
    class_names: Optional[Tuple[str, ...]]
    num_outputs: int
    values: Optional[Tuple] = None

    @property
    def num_classes(self) -> Optional[int]:
        """Classes of a classification or binary task (2 for binary), labels of a
        multi_label one; None for regression."""
        if self.task == "regression":
            return None
        if self.task == "binary":
            return 2
        return self.num_outputs

    @property
    def identity(self) -> bool:
        """Whether `encode` leaves the labels as they are (ids already 0..K-1 in order)."""
        return self.values is None or all(
            _is_integral(v) and int(v) == i for i, v in enumerate(self.values))

    def encode(self, labels) -> np.ndarray:
        """The model's targets for `labels` (the same kind the plan was made from).

        classification: int32 ids 0..K-1; binary: float32 0/1 of shape (n, 1) is left to
        the model head, here int32 ids 0/1; multi_label: float32 0/1 as given;
        regression: float32 as given.

        Raises:
            DataError: A label the plan has no class for (a value first seen outside the
                training split).
        """
        labels = np.asarray(labels)
        if self.task in ("multi_label", "regression"):
            return labels.astype(np.float32)
        if self.identity:
            return labels.astype(np.int32)
        if labels.dtype.kind in "iufb":
            return self._encode_numbers(labels)
        keys = [_key(v) for v in self.values]
        lookup = {k: i for i, k in enumerate(keys)}
        flat = labels.reshape(-1)
        out = np.empty(flat.shape, np.int32)
        for j, value in enumerate(flat):
            found = lookup.get(_key(value))
            if found is None:
                raise DataError(f"label {_show(value)} is not one of the classes seen in the "
                                f"training split ({', '.join(self.class_names[:10])}"
                                f"{', ...' if len(self.class_names) > 10 else ''}).")
            out[j] = found
        return out.reshape(labels.shape)

    def _encode_numbers(self, labels) -> np.ndarray:
        known = np.asarray(self.values, dtype=np.float64)  # sorted: the distinct values
        flat = labels.reshape(-1).astype(np.float64)
        ids = np.clip(np.searchsorted(known, flat), 0, len(known) - 1)
        unknown = known[ids] != flat
        if unknown.any():
            value = labels.reshape(-1)[int(np.argmax(unknown))]
            raise DataError(f"label {_show(value)} is not one of the classes seen in the "
                            f"training split ({', '.join(self.class_names[:10])}"
                            f"{', ...' if len(self.class_names) > 10 else ''}).")
        return ids.astype(np.int32).reshape(labels.shape)

    def summary(self) -> dict:
        """The plan as summary.json and the exported model's labels file show it."""
        return {"task": self.task, "num_outputs": self.num_outputs,
                "class_names": list(self.class_names) if self.class_names else None}


def plan_labels(labels, *, task: str = "auto", where: str, names: Optional[Sequence[str]] = None,
                num_classes: Optional[int] = None) -> LabelPlan:
    """Decides the task and the classes from the training labels.

    Args:
        labels: The training split's labels: shape ``(n,)`` (one label or target per
            example: ints, floats, bools or strings) or ``(n, m)`` (several 0/1 labels or
            several float targets per example).
        task: ``data.task``: auto (infer), classification, binary, multi_label or
            regression.
        where: What the labels are, for messages ("data.label_key 'species' of data.path
            'penguins.csv'").
        names: The names of the m columns of a 2-D `labels` (label or target names).
        num_classes: ``data.num_classes`` when declared: integer labels 0..n-1 keep their
            ids (a class may be absent from this split), as before.

    Raises:
        DataError: The labels cannot serve the task (a float target for classification,
            a third value for binary, non-0/1 values for multi_label, strings for
            regression), there is only one class, or auto cannot tell (named in the
            message with the data.task value that would decide).
    """
    if task not in TASKS:
        raise DataError(f"data.task must be one of {list(TASKS)}, got {task!r}.")
    labels = np.asarray(labels)
    if labels.ndim == 0 or labels.ndim > 2:
        raise DataError(f"{where}: labels must be one value or one row of values per example, "
                        f"got shape {labels.shape}.")
    if labels.ndim == 2 and labels.shape[1] == 1 and task != "multi_label":
        labels = labels[:, 0]
    kind = _kind(labels)
    if task == "auto":
        task = _infer(labels, kind=kind, where=where)
    if labels.ndim == 2:
        return _plan_columns(labels, task=task, kind=kind, where=where, names=names)
    if task == "regression":
        if kind == "string":
            raise DataError(f"{where} holds text labels ({_examples(labels)}); a regression "
                            "target must be numbers. Set data.task: classification.")
        return LabelPlan("regression", tuple(names) if names else None, 1)
    if task == "multi_label":
        raise DataError(f"{where} holds one label per example; data.task multi_label needs "
                        "several 0/1 label columns (data.label_key: [a, b, ...]) or a list of "
                        "labels per example.")
    if kind == "float" and not _all_integral(labels):
        raise DataError(f"{where} holds float values ({_examples(labels)}), not class labels; "
                        f"data.task {task} needs integer or text labels. For a numeric target "
                        "set data.task: regression.")
    values = _distinct(labels, kind=kind)
    if num_classes is not None and kind in ("int", "float", "bool"):
        return _declared_classes(values, task=task, where=where, num_classes=num_classes)
    if len(values) < 2:
        raise DataError(f"{where} holds one class ({_show(values[0]) if values else 'none'}): "
                        "a classifier needs at least 2 classes.")
    if task == "binary" and len(values) != 2:
        raise DataError(f"{where} holds {len(values)} classes ({_examples(values)}); data.task "
                        "binary needs exactly 2. Set data.task: classification.")
    return LabelPlan(task, tuple(_show(v) for v in values),
                     1 if task == "binary" else len(values), tuple(values))


def _plan_columns(labels, *, task, kind, where, names) -> LabelPlan:
    width = labels.shape[1]
    names = tuple(str(n) for n in names) if names else tuple(f"label_{i}" for i in range(width))
    if len(names) != width:
        raise DataError(f"{where}: {width} label columns but {len(names)} names.")
    if kind == "string":
        raise DataError(f"{where} holds text in several label columns; several columns are "
                        "0/1 labels (multi_label) or float targets (regression).")
    if task == "multi_label":
        if not np.isin(labels, (0, 1)).all():
            raise DataError(f"{where} holds values other than 0 and 1 "
                            f"({_examples(labels[~np.isin(labels, (0, 1))])}); data.task "
                            "multi_label needs 0/1 columns. For numeric targets set "
                            "data.task: regression.")
        return LabelPlan("multi_label", names, width)
    if task == "regression":
        return LabelPlan("regression", names, width)
    raise DataError(f"{where} has {width} label columns; data.task {task} takes one label "
                    "column. Several columns are multi_label (0/1) or regression targets.")


def _infer(labels, *, kind: str, where: str) -> str:
    if labels.ndim == 2:
        return "multi_label" if kind != "string" and np.isin(labels, (0, 1)).all() \
            else "regression"
    if kind == "float" and not _all_integral(labels):
        return "regression"
    if kind in ("int", "float"):
        distinct = len(np.unique(labels))
        if distinct > _MANY_CLASSES and distinct > len(labels) // 2:
            raise DataError(f"{where} holds {distinct} distinct integer values in "
                            f"{len(labels)} examples: a quantity or as many classes? Set "
                            "data.task: regression for a numeric target, or "
                            "data.task: classification for classes.")
    return "classification"


def _declared_classes(values, *, task, where, num_classes) -> LabelPlan:
    ints = [int(v) for v in values]
    if ints and (ints[0] < 0 or ints[-1] >= num_classes):
        bad = ints[0] if ints[0] < 0 else ints[-1]
        raise DataError(f"{where} holds label {bad} but data.num_classes is {num_classes}; "
                        "with data.num_classes set, labels must be integers from 0 to "
                        "data.num_classes - 1 (or leave data.num_classes empty: the classes "
                        "are then the distinct label values).")
    if num_classes < 2:
        raise DataError(f"data.num_classes is {num_classes}; a classifier needs at least 2 "
                        "classes.")
    if task == "binary" and num_classes != 2:
        raise DataError(f"data.task binary needs 2 classes, data.num_classes is {num_classes}.")
    return LabelPlan(task, tuple(str(i) for i in range(num_classes)),
                     1 if task == "binary" else num_classes, tuple(range(num_classes)))


def _kind(labels) -> str:
    if labels.dtype.kind == "b":
        return "bool"
    if labels.dtype.kind in "iu":
        return "int"
    if labels.dtype.kind == "f":
        return "float"
    if labels.dtype.kind in "USO":
        return "string"
    raise DataError(f"labels of dtype {labels.dtype} are neither numbers nor text.")


def _distinct(labels, *, kind):
    if kind == "string":
        return sorted({_key(v) for v in labels.reshape(-1)})
    values = np.unique(labels)
    if kind == "float":
        return [int(v) for v in values]
    if kind == "bool":
        return [bool(v) for v in values]
    return [int(v) for v in values]


def _key(value):
    """A label as a dict key: bytes and str alike as str, numbers as int when integral."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_integral(value) -> bool:
    return isinstance(_key(value), int)  # bool is an int: False/True are ids 0/1


def _all_integral(labels) -> bool:
    finite = np.isfinite(labels)
    return bool(finite.all() and (labels == np.round(labels)).all())


def _show(value) -> str:
    value = _key(value)
    return value if isinstance(value, str) else repr(value)


def _examples(values, limit: int = 4) -> str:
    flat = list(np.asarray(values).reshape(-1)[:limit])
    return ", ".join(_show(v) for v in flat) + (", ..." if np.size(values) > limit else "")

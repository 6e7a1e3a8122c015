"""`TailOptions`: the pipeline tail's options (`optimize`'s keywords) as one frozen object."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Iterator


class _Unset:
    """The value of a field nobody set: it is not passed, the builder's own default holds."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclasses.dataclass(frozen=True)
class TailOptions(Mapping):
    """Options of the standard tail (`tfaccel.data.optimize`) for one split of a source.

    Built once by `data.from_recipe` (the options both splits share, and each split's own)
    and never changed: a variant is `dataclasses.replace(options, field=value)`, and an
    unknown field fails at construction (`TypeError` naming it), where a dict grew or lost
    a key anywhere it was passed. Each field means what `optimize`'s keyword of the same
    name means; a field left `UNSET` is not passed at all, so a `from_*` builder's own
    default holds, exactly as when a dict did not hold the key.

    It is a read-only mapping of its set fields because the `from_*` builders, like
    Keras' loaders they replace, take keywords: a source spreads it into its builder call
    (``from_tfrecords(..., **common, **train_options)``).
    """

    sequential: Any = UNSET
    seed: Any = UNSET
    deterministic: Any = UNSET
    num_parallel_calls: Any = UNSET
    private_threads: Any = UNSET
    ram_budget_bytes: Any = UNSET
    cache: Any = UNSET
    augment: Any = UNSET
    augment_on: Any = UNSET
    drop_remainder: Any = UNSET
    batch_by_length: Any = UNSET
    stream: Any = UNSET
    input_context: Any = UNSET
    service: Any = UNSET
    shard_policy: Any = UNSET
    image_dtype: Any = UNSET

    def __post_init__(self):
        # The set fields, once: `**options` reads keys() and every value, per builder call.
        object.__setattr__(self, "_given", {
            field.name: getattr(self, field.name) for field in dataclasses.fields(self)
            if getattr(self, field.name) is not UNSET})

    def __getitem__(self, name: str):
        """The value of a set field; `KeyError` for an unset or unknown one, as a dict's."""
        return self._given[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._given)

    def __len__(self) -> int:
        return len(self._given)

    def keys(self):
        """The set fields' names (what ``**options`` passes)."""
        return self._given.keys()

    def without(self, names) -> "TailOptions":
        """A copy with the fields `names` unset (not passed: the builder's defaults hold)."""
        return dataclasses.replace(self, **{name: UNSET for name in names})

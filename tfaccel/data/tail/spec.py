"""The tail's two typed inputs: `TailOptions` (what the caller asks) and `SourceStages` (what the source decides)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Optional


class _Unset:
    """The value of a field nobody set: it is not passed, the builder's own default holds."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclasses.dataclass(frozen=True)
class TailOptions(Mapping):
    """The caller's options of the standard tail (`tfaccel.data.optimize`) for one split.

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

    def set_fields(self) -> dict:
        """The set fields as a new dict: the keywords of a builder's stages that still
        read its options as a dict (`files_stage`)."""
        return dict(self._given)

    def merged(self, other: "TailOptions") -> "TailOptions":
        """A copy with `other`'s set fields over these (a split's own options over the
        ones both splits share)."""
        return dataclasses.replace(self, **{
            field.name: getattr(other, field.name) for field in dataclasses.fields(other)
            if getattr(other, field.name) is not UNSET})

    def without(self, names) -> "TailOptions":
        """A copy with the fields `names` unset (not passed: the builder's defaults hold)."""
        return dataclasses.replace(self, **{name: UNSET for name in names})

    def resolved(self) -> "TailOptions":
        """A copy in which every unset field holds the tail's default (`DEFAULTS`): what
        the tail itself reads, so no stage meets `UNSET`."""
        return dataclasses.replace(self, **{name: DEFAULTS[name] for name in DEFAULTS
                                            if getattr(self, name) is UNSET})


# The tail's default of each `TailOptions` field (`optimize`'s keyword defaults): what a
# field nobody set means once no builder is left to decide it. -1 is tf.data.AUTOTUNE
# (this module stays TensorFlow-free).
DEFAULTS = dict(sequential=False, seed=None, deterministic=False, num_parallel_calls=-1,
                private_threads=None, ram_budget_bytes=None, cache=None, augment=None,
                augment_on="batch", drop_remainder=None, batch_by_length=False, stream=None,
                input_context=None, service=None, shard_policy=None, image_dtype="float32")


def given(**values) -> dict:
    """The tail options a `from_*` builder received by name, as the keywords its own stages
    read: each one that differs from the tail's default (`DEFAULTS`); one equal to it is
    left out, as if not given, so a builder's own choice (a shard policy, the dtype of a
    crop) holds exactly where it held when the caller left the option out."""
    return {name: value for name, value in values.items()
            if not (value is DEFAULTS[name] or (type(value) is type(DEFAULTS[name])
                                                and value == DEFAULTS[name]))}


def culprit_of(map_fn: Optional[Callable]) -> str:
    """What made the examples a stage complains about: the decode function, by name."""
    if map_fn is None:
        return "the dataset's images"
    return f"the images of optimize(map_fn={getattr(map_fn, '__name__', repr(map_fn))})"


@dataclasses.dataclass(frozen=True)
class SourceStages:
    """What a source decides of the tail for its own examples (never a user's option).

    The tail runs these where their place in its one order is (`tfaccel.data.optimize`'s
    docstring gives the order): a source builds one and hands it to the tail with the
    caller's `TailOptions`; `optimize` builds one from its own keywords for a plain dataset.

    Attributes:
        map_fn: Stage 1, the per-example decode (read, parse, resize) run as a parallel
            map before the cache; None: the examples are ready as they come.
        source_shuffle: A shuffle buffer before `map_fn`, for elements that are cheap
            references (paths, indices): a global shuffle for a few bytes each.
        shuffle_buffer: The shuffle buffer after the cache (examples), 0 for none.
        ignore_decode_errors: Skip examples whose `map_fn` fails (after a source's own
            up-front file check, as a last safety net), logged by tf.data.
        random_decode: ``fn(features, seed) -> features``: per-example work that is random
            and so comes after the cache and the shuffle, before augmentation (a random crop
            decoded from cached file bytes, `tfaccel.data.crops`); seeded like the
            augmentations (a shape-[2] int64 seed).
        padded_batch: Batch examples of not fully known shapes with `Dataset.padded_batch`
            (zeros up to the longest of each batch, as Keras' audio loader) instead of as
            RaggedTensors.
        cache_fingerprint: A JSON-able dict of everything the cached examples depend on
            (files, order, decode settings); None: the input cannot be looked into (said
            once per file cache, which is then reused as it is).
        culprit: What made the examples, for messages about their shapes (None: the
            `map_fn`, by name).
        batch_map_fn: ``fn(images) -> images``: the rest of the decode, run on each
            batch of images right after the batch stage, before augmentation (an image
            folder's resize when every file decodes to one size: one resize op a batch);
            with ``batch_size=None`` on each image. None: nothing.
    """

    map_fn: Optional[Callable] = None
    source_shuffle: int = 0
    shuffle_buffer: int = 0
    ignore_decode_errors: bool = False
    random_decode: Optional[Callable] = None
    padded_batch: bool = False
    cache_fingerprint: Optional[dict] = None
    culprit: Optional[str] = None
    batch_map_fn: Optional[Callable] = None

    def __post_init__(self):
        if self.culprit is None:
            object.__setattr__(self, "culprit", culprit_of(self.map_fn))

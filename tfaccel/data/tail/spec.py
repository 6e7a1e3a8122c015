"""The tail's two typed inputs: `TailOptions` (what the caller asks) and `SourceStages` (what the source decides)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional


class _Unset:
    """The value of a field nobody set: the tail's default holds (or a source's own, `chosen`)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclasses.dataclass(frozen=True)
class TailOptions:
    """The caller's options of the standard tail (`tfaccel.data.optimize`) for one split.

    Built once by `data.from_recipe` (the options both splits share, and each split's own)
    or by a `from_*` front door from its keywords, and never changed: a variant is
    `dataclasses.replace(options, field=value)`, and an unknown field fails at construction
    (`TypeError` naming it). Each field means what `optimize`'s keyword of the same name
    means; a field left `UNSET` holds the tail's default (`DEFAULTS`, read through
    `resolved`), unless the source that reads it has its own (`chosen`).

    Not a mapping: it travels whole, from a `Source` (or a front door) to the source's
    internal builder and on to `tail.build`, never spread into keywords.
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

    def merged(self, other: "TailOptions") -> "TailOptions":
        """A copy with `other`'s set fields over these (a split's own options over the
        ones both splits share)."""
        return dataclasses.replace(self, **{
            field.name: getattr(other, field.name) for field in dataclasses.fields(other)
            if getattr(other, field.name) is not UNSET})

    def without(self, names) -> "TailOptions":
        """A copy with the fields `names` unset (their defaults hold)."""
        return dataclasses.replace(self, **{name: UNSET for name in names})

    def chosen(self) -> "TailOptions":
        """A copy in which every field that holds the tail's default (`DEFAULTS`) is unset:
        what the caller chose. A source with a choice of its own where the caller left an
        option to the tail (a shard policy, the dtype of a nearest-neighbour resize) makes
        it where this copy's field is `UNSET`, whether the caller left the field unset or
        passed the default by name (a front door names every keyword)."""
        return dataclasses.replace(self, **{
            name: UNSET for name, default in DEFAULTS.items()
            if getattr(self, name) is default or (type(getattr(self, name)) is type(default)
                                                  and getattr(self, name) == default)})

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

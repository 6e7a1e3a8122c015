"""The one standard tf.data tail (decode, cache, shuffle, augment, batch, prefetch), one module per stage.

A source hands `build` its examples with two typed objects: `SourceStages` (what it decided
of its own examples) and `TailOptions` (the caller's options); `optimize` is the public front
door for a dataset of one's own. The modules: `counting` (batches and the drop rule),
`data_options` (the `tf.data.Options`), `stages` (each stage), `stream` (the resumable
passes), `assemble` (the order of the stages, and the checks of their inputs), `spec` (the
two types).
"""

from tfaccel.data.tail.assemble import (
    AUTOTUNE,
    build,
    optimize,
    refuse_unknown,
    validation_options,
)
from tfaccel.data.tail.counting import batch_only_context, batches_per_pass, drops_remainder
from tfaccel.data.tail.data_options import make_options, sequential_options
from tfaccel.data.tail.spec import UNSET, SourceStages, TailOptions
from tfaccel.data.tail.stream import EpochStream

__all__ = ["AUTOTUNE", "UNSET", "EpochStream", "SourceStages", "TailOptions",
           "batch_only_context", "batches_per_pass", "build", "drops_remainder",
           "make_options", "optimize", "refuse_unknown", "sequential_options",
           "validation_options"]

"""Fast tf.data pipelines from arrays, image/text/audio folders, CSV, TFRecords, TFDS, time series, Python."""

import importlib
from typing import TYPE_CHECKING

from tfaccel.data.augment import AUGMENTATIONS
from tfaccel.data.in_memory import from_arrays
from tfaccel.data.resample import resample as resample_audio
from tfaccel.data.service import ServiceTarget
from tfaccel.data.sources.audio_folder import from_audio_folder
from tfaccel.data.sources.csv_tables import from_csv
from tfaccel.data.sources.image_folder import from_image_folder
from tfaccel.data.sources.python import from_python
from tfaccel.data.sources.text_folder import from_text_folder
from tfaccel.data.sources.text_lines import from_text_lines
from tfaccel.data.sources.tfrecords import from_tfrecords, parse_feature_spec
from tfaccel.data.sources.timeseries import from_timeseries, from_timeseries_csv
from tfaccel.data.tail import AUTOTUNE, EpochStream, make_options, optimize, sequential_options
from tfaccel.reading.worker_pool import WorkerError

if TYPE_CHECKING:  # for readers and the API docs; imported on first use (below)
    from tfaccel.data.image_folder_writer import export_image_folder
    from tfaccel.data.sources.tfds import from_tfds

__all__ = [
    "AUGMENTATIONS", "AUTOTUNE", "EpochStream", "WorkerError", "export_image_folder", "from_arrays",
    "from_audio_folder", "from_csv", "from_image_folder", "from_python", "from_text_folder",
    "from_text_lines", "from_tfds", "from_tfrecords", "from_timeseries", "from_timeseries_csv",
    "make_options", "optimize",
    "parse_feature_spec", "resample_audio", "sequential_options", "ServiceTarget",
]


# TFDS (tensorflow_datasets: ~1 s to import) only when asked for: a user who never touches
# TFDS does not pay for it. export_image_folder reads TFDS datasets too.
_LAZY = {"from_tfds": "tfaccel.data.sources.tfds",
         "export_image_folder": "tfaccel.data.image_folder_writer"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

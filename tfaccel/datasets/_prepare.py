"""Prepares a built-in dataset once through TFDS, saying so in one line instead of TFDS."""

import contextlib
import io
import logging
import os

import tensorflow_datasets as tfds

from tfaccel.messages import say, verbose


def prepare_once(builder_class, data_dir=None):
    """Prepares the dataset of `builder_class` in `data_dir` unless it is; the builder.

    One tfaccel line replaces TFDS' "Downloading and preparing dataset Unknown size ..."
    and "... downloaded and prepared" (nothing is downloaded), its progress bars, and the
    absl warning that the version folder it is about to fill "has no dataset_info.json".
    Statistics are not computed: they would read the data back just to count labels,
    which are balanced by construction.

    Args:
      builder_class: The dataset's ``tfds.core.GeneratorBasedBuilder``.
      data_dir: TFDS data directory, a path or None (TFDS' default).
    """
    with _tfds_chatter_hidden():
        builder = builder_class(data_dir=os.fspath(data_dir) if data_dir is not None else None)
        if builder.is_prepared():
            return builder
    say(f"preparing the built-in dataset {builder.name} in {builder.data_dir} "
        "(once; no download)...")
    tfds.disable_progress_bar()
    with _tfds_chatter_hidden():
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
            compute_stats=tfds.download.ComputeStatsMode.SKIP))
    return builder


class _BelowError(logging.Filter):
    def filter(self, record) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _tfds_chatter_hidden():
    """TFDS' prints (stdout) and absl warnings dropped for the block, unless verbose."""
    if verbose():
        yield
        return
    absl = logging.getLogger("absl")
    below_error = _BelowError()
    absl.addFilter(below_error)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        absl.removeFilter(below_error)

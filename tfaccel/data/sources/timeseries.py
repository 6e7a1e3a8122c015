"""Sliding windows over a time series (an array or columns of a CSV file) as a batched tf.data pipeline."""

from __future__ import annotations

import dataclasses
import itertools
import operator
import os
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from tfaccel.data import finite_values, order, sharding, splits, tail, text_files
from tfaccel.data.dataset_info import SeriesInfo
from tfaccel.data.sources import base
from tfaccel.errors import DataError, UserInputError, did_you_mean
from tfaccel.reading import csv_files
from tfaccel.reading import labels as label_rule

# optimize's options that mean nothing here: the pipeline carries window start positions
# (a few bytes each) and gathers each batch of windows from the array in memory at the end.
_NOT_TAKEN = {
    "cache": "the windows are gathered from the array in memory, so a cache would only "
             "copy them (sequence_length times the data)",
    "augment": "the named augmentations are for images",
    "augment_on": "the named augmentations are for images",
    "image_dtype": "the windows keep the array's dtype, as Keras' loader does",
}
_KERAS_SHUFFLE_BUFFER_UNBATCHED = 1024  # Keras' buffer when batch_size=None


def _check_int(name: str, value, *, minimum: Optional[int] = None) -> int:
    try:
        value = operator.index(value)
    except TypeError:
        raise UserInputError(f"`{name}` must be an integer. Received: {name}={value!r}") \
            from None
    if minimum is not None and value < minimum:
        raise UserInputError(f"`{name}` must be {minimum} or greater. Received: "
                             f"{name}={value}")
    return value


def _check_range(length: int, *, start_index, end_index, sampling_rate, sequence_stride):
    """Keras' argument checks, in Keras' order and wording (its tests match the wording)."""
    if start_index:
        if start_index < 0:
            raise UserInputError("`start_index` must be 0 or greater. Received: "
                                 f"start_index={start_index}")
        if start_index >= length:
            raise UserInputError(
                "`start_index` must be lower than the length of the data. Received: "
                f"start_index={start_index}, for data of length {length}")
    if end_index is not None:
        # Keras skips these checks for end_index=0 (falsy) and returns an empty dataset.
        if start_index and end_index <= start_index:
            raise UserInputError(
                "`end_index` must be higher than `start_index`. Received: "
                f"start_index={start_index}, and end_index={end_index}")
        if end_index >= length:
            raise UserInputError(
                "`end_index` must be lower than the length of the data. Received: "
                f"end_index={end_index}, for data of length {length}")
        if end_index <= 0:
            raise UserInputError(f"`end_index` must be higher than 0. Received: "
                                 f"end_index={end_index}")
    for name, value in (("sampling_rate", sampling_rate), ("sequence_stride", sequence_stride)):
        if value <= 0:
            raise UserInputError(f"`{name}` must be higher than 0. Received: {name}={value}")
        if value >= length:
            raise UserInputError(
                f"`{name}` must be lower than the length of the data. Received: "
                f"{name}={value}, for data of length {length}")


def _span(sequence_length: int, sampling_rate: int) -> int:
    """Timesteps one window covers, first to last step."""
    return (sequence_length - 1) * sampling_rate + 1


def _too_short(where: str, *, length: int, used: int, start_index, end_index,
               sequence_length: int, sampling_rate: int) -> DataError:
    return DataError(
        f"{where} is too short for one window: it has {length} timesteps, of which {used} "
        f"are used (start_index={start_index}, end_index={end_index}), and one window needs "
        f"(sequence_length - 1) * sampling_rate + 1 = ({sequence_length} - 1) * "
        f"{sampling_rate} + 1 = {_span(sequence_length, sampling_rate)}.")


def window_starts(length: int, *, targets_length: Optional[int], sequence_length: int,
                  sequence_stride: int, sampling_rate: int, start_index: Optional[int],
                  end_index: Optional[int], where: str = "data") -> np.ndarray:
    """The start of every window, relative to `start_index`, in Keras' chronological order.

    Keras' rule: windows start at 0, stride, 2*stride, ... while the window's last step
    stays before `end_index` and the window has a target. A window's target is
    ``targets[start_index + start]``, so the targets after `start_index` are what count
    (Keras counts all of them and then fails mid-epoch on an index past the end).

    Args:
        length: Timesteps in the data.
        targets_length: Entries in the targets (None: no targets).
        sequence_length: Timesteps in a window.
        sequence_stride: Timesteps between two windows' starts.
        sampling_rate: Timesteps between two steps of a window.
        start_index: First timestep used (None: 0).
        end_index: Timesteps from here on are not used (None: the data's length).
        where: What the data is, for the messages ("data", a file's name).

    Returns:
        An int64 array of window starts.

    Raises:
        DataError: Not even one window fits (Keras returns an empty dataset).
    """
    start = start_index or 0
    end = length if end_index is None else end_index
    count = end - start - _span(sequence_length, sampling_rate) + 1
    if count <= 0:
        raise _too_short(where, length=length, used=max(end - start, 0),
                         start_index=start_index, end_index=end_index,
                         sequence_length=sequence_length, sampling_rate=sampling_rate)
    if targets_length is not None:
        with_target = max(min(targets_length, end) - start, 0)
        if with_target == 0:
            raise DataError(
                f"No window of {where} has a target: there are {targets_length} targets "
                f"and the first window's is targets[{start}] (start_index={start_index}).")
        count = min(count, with_target)
    return np.arange(0, count, sequence_stride, dtype=np.int64)


def _shuffle_rule(*, shuffle: bool, shuffle_buffer: Optional[int], seed, batch_size,
                  input_context) -> Tuple[Optional[int], int]:
    """Keras' shuffle: the starts permuted once (seeded), then a local buffer each epoch.

    Returns ``(seed, shuffle_buffer)``: the seed both use (drawn as Keras draws it when
    None; None without shuffle) and the windows' buffer (0 without shuffle).
    """
    if not shuffle:
        if shuffle_buffer:
            raise UserInputError(f"shuffle_buffer={shuffle_buffer!r} needs "
                                 "shuffle=True (windows come in chronological order).")
        return None, 0
    seed = order.resolve_seed(seed, input_context=input_context)
    if shuffle_buffer is None:
        # Keras' own buffers, so the same seed gives Keras' order, epoch after epoch.
        shuffle_buffer = (batch_size * 8 if batch_size is not None
                          else _KERAS_SHUFFLE_BUFFER_UNBATCHED)
    return seed, shuffle_buffer


def from_timeseries(data, targets, sequence_length: int, *, sequence_stride: int = 1,
                    sampling_rate: int = 1, batch_size: Optional[int] = 128,
                    shuffle: bool = False, seed: Optional[int] = None,
                    start_index: Optional[int] = None, end_index: Optional[int] = None,
                    shuffle_buffer: Optional[int] = None, deterministic: bool = True,
                    drop_remainder: Optional[bool] = None,
                    num_parallel_calls: int = tail.AUTOTUNE,
                    private_threads: Optional[int] = None,
                    ram_budget_bytes: Optional[int] = None, shard_policy: Optional[str] = "data",
                    input_context=None, sequential: bool = False, stream=None, service=None,
                    batch_by_length: bool = False, **unknown) -> tf.data.Dataset:
    """Sliding windows over a time series: `keras.utils.timeseries_dataset_from_array`.

    The same arguments, checks and output as Keras' loader, window for window and target
    for target, in the same order (with ``shuffle=True`` too: the same seed gives Keras'
    order, epoch after epoch). The pipeline carries only window start positions (cheap to
    shuffle, shard and resume) and gathers each whole batch of windows in one op in a
    parallel map, where Keras gathers window by window. `sequence_length` may be given
    positionally, as Keras' callers do.

    Example::

        # Predict the step after each 24-step window.
        train = tfaccel.data.from_timeseries(series[:-24], series[24:], 24,
                                             batch_size=64, shuffle=True, seed=0)
        model.fit(train, epochs=5)

    Args:
        data: An array (or tensor) of timesteps along axis 0.
        targets: ``targets[i]`` is the target of the window starting at timestep ``i``;
            None for windows alone.
        sequence_length: Timesteps in each window.
        sequence_stride: Timesteps between the starts of two windows.
        sampling_rate: Timesteps between two steps of a window.
        batch_size: The GLOBAL batch size; None yields single windows.
        shuffle: Shuffle the windows (Keras' rule: their starts permuted once with
            `seed`, then a buffer of ``8 * batch_size`` windows reshuffled each epoch).
        seed: Seed of the shuffle; None draws one as Keras does (0 under a multi-worker
            strategy, so every worker permutes alike).
        start_index: Timesteps before it are not used.
        end_index: Timesteps from it on are not used.
        shuffle_buffer: The windows' shuffle buffer, replacing Keras' ``8 * batch_size``
            (only with ``shuffle=True``).
        deterministic: Keep the windows' order (default True, as Keras' maps keep it).
        drop_remainder: None: True when more than one replica is in sync.
        num_parallel_calls: Parallelism of the maps (AUTOTUNE).
        private_threads: As `tfaccel.data.optimize`'s.
        ram_budget_bytes: As `optimize`'s.
        shard_policy: ``"data"`` (default): in-memory windows have no files to split
            among workers; else as `optimize`'s.
        input_context: From ``distribute_datasets_from_function`` (`optimize`'s).
        sequential: The benchmarks' truly sequential pipeline (`optimize`'s).
        stream: An `EpochStream`: a resumable stream of passes (`optimize`'s).
        service: A `ServiceTarget`: run the tail on a tf.data service (`optimize`'s).
        batch_by_length: As `optimize`'s.
        **unknown: Refused, naming the nearest keyword (`tail.refuse_unknown`); `cache`,
            `augment`, `augment_on` and `image_dtype` with the reason they do not apply.

    Returns:
        A `tf.data.Dataset` of ``(windows, targets)`` batches (or windows alone), windows
        of shape ``[batch, sequence_length, *data.shape[1:]]`` in the data's dtype, with
        the attribute ``num_windows`` (windows in one pass).

    Raises:
        UserInputError: An argument Keras refuses (Keras' wording), or an option that
            does not apply here.
        DataError: The data is too short for one window, no window has a target, or
            floating-point data or targets hold NaN or an infinite value (the first named
            with its timestep).
    """
    tail.refuse_unknown(unknown, builder=from_timeseries, refused=_NOT_TAKEN)
    options = tail.TailOptions(
        seed=seed, deterministic=deterministic, shard_policy=shard_policy,
        drop_remainder=drop_remainder, num_parallel_calls=num_parallel_calls,
        private_threads=private_threads, ram_budget_bytes=ram_budget_bytes,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    # Keras passes NaN on; here it is named (finite_values), as from_arrays names it.
    finite_values.check_array(np.asarray(data), name="data", unit="timestep")
    if targets is not None:
        finite_values.check_array(np.asarray(targets), name="targets", unit="timestep")
    return windows_dataset(data, targets, sequence_length, sequence_stride=sequence_stride,
                           sampling_rate=sampling_rate, batch_size=batch_size,
                           shuffle=shuffle, shuffle_buffer=shuffle_buffer,
                           start_index=start_index, end_index=end_index, options=options,
                           where="data")


def windows_dataset(data, targets, sequence_length, *, sequence_stride, sampling_rate,
                    batch_size, shuffle, shuffle_buffer: Optional[int], start_index,
                    end_index, options: tail.TailOptions, where: str) -> tf.data.Dataset:
    """`from_timeseries` with the tail's options as one `TailOptions` (what the source
    calls: unset ``deterministic`` is True, unset ``shard_policy`` "data", as
    `from_timeseries`' defaults) and `where` naming the data in messages (a CSV file's
    name)."""
    sequence_length = _check_int("sequence_length", sequence_length, minimum=1)
    sequence_stride = _check_int("sequence_stride", sequence_stride)  # ranges: Keras' checks
    sampling_rate = _check_int("sampling_rate", sampling_rate)
    data = tf.convert_to_tensor(data)
    if data.shape.rank == 0:
        raise DataError(f"{where} must be an array of timesteps along axis 0; got a "
                        f"scalar {data.numpy()!r}.")
    length = int(data.shape[0])
    if sampling_rate > 0 and length < _span(sequence_length, sampling_rate):
        # Before Keras' checks, which would call a one-row file's stride too long.
        raise _too_short(where, length=length, used=length, start_index=start_index,
                         end_index=end_index, sequence_length=sequence_length,
                         sampling_rate=sampling_rate)
    _check_range(length, start_index=start_index, end_index=end_index,
                 sampling_rate=sampling_rate, sequence_stride=sequence_stride)
    if targets is not None:
        targets = tf.convert_to_tensor(targets)
        if targets.shape.rank == 0:
            raise DataError(f"targets must be an array (one target per timestep); got a "
                            f"scalar {targets.numpy()!r}.")
    starts = window_starts(length, targets_length=None if targets is None
                           else int(targets.shape[0]), sequence_length=sequence_length,
                           sequence_stride=sequence_stride, sampling_rate=sampling_rate,
                           start_index=start_index, end_index=end_index, where=where)
    seed, shuffle_buffer = _shuffle_rule(
        shuffle=shuffle, shuffle_buffer=shuffle_buffer, seed=options.resolved().seed,
        batch_size=batch_size, input_context=options.resolved().input_context)
    count = len(starts)
    if seed is not None:
        starts = starts[order.permutation(len(starts), seed)]
    if options.deterministic is tail.UNSET:
        options = dataclasses.replace(options, deterministic=True)  # Keras' order
    if options.shard_policy is tail.UNSET:
        # In-memory data has no files to split: a multi-worker strategy shards by element.
        options = dataclasses.replace(options, shard_policy="data")
    options = sharding.fix_order_for_data_sharding(
        dataclasses.replace(options, seed=seed, image_dtype=None))
    starts = tail.build(tf.data.Dataset.from_tensor_slices(starts + (start_index or 0)),
                        batch_size=batch_size, options=options,
                        source=tail.SourceStages(shuffle_buffer=shuffle_buffer))
    resolved = options.resolved()
    steps = tf.range(sequence_length, dtype=tf.int64) * sampling_rate

    def gather(first):
        # first: [batch] (or a scalar unbatched); one gather makes the whole batch.
        windows = tf.gather(data, first[..., tf.newaxis] + steps)
        return windows if targets is None else (windows, tf.gather(targets, first))

    if resolved.sequential:  # the benchmarks' baseline: no parallel call, no prefetch
        windows = starts.map(gather)
    else:
        windows = starts.map(gather, num_parallel_calls=resolved.num_parallel_calls,
                             deterministic=resolved.deterministic).prefetch(tail.AUTOTUNE)
    windows.num_windows = count
    return windows


def _header(path: str, text: str, *, delimiter: str) -> List[str]:
    # THE reader's header (tfaccel.reading.csv_files): names stripped, blank lines skipped.
    for _, fields in csv_files.text_records(text, path=path, delimiter=delimiter):
        return csv_files.names_of(fields, path=path, delimiter=delimiter)
    raise DataError(f"Time series CSV file {path!r} is empty: it needs a header line "
                    "naming its columns, then one line per timestep.")


def _column_indices(path: str, header: List[str], names: Sequence[str], *,
                    argument: str) -> List[int]:
    indices = []
    for name in names:
        if name not in header:
            raise DataError(f"{argument} names column {name!r}{did_you_mean(name, header)}, "
                            f"which is not in {path!r}; its columns are {header}.")
        indices.append(header.index(name))
    return indices


def _rows(text: str, *, delimiter: str, path: str = "<text>"):
    """``(line number, fields)`` of each row after the header, in order (THE reader's
    rule, `csv_files.is_blank`: a blank line is no row)."""
    records = csv_files.text_records(text, path=path, delimiter=delimiter)
    next(records, None)
    yield from records


def _first_bad_row(path: str, text: str, *, delimiter: str, header: List[str],
                   values_of: Sequence[int] = (), dtype=None) -> Optional[DataError]:
    """The first line with another number of fields than the header (or, in the columns
    `values_of`, a value that is not a number), named; None when every line is good.

    csv's C reader counts fields at about 2 M lines/s; the values are parsed here only
    after numpy's fast reader failed, to name the line it does not.
    """
    for line, row in _rows(text, delimiter=delimiter, path=path):
        if len(row) != len(header):
            return DataError(
                f"{path!r}, line {line}: {len(row)} fields where the header "
                f"has {len(header)} ({header}).")
        for i in values_of:
            try:
                np.array([row[i]]).astype(dtype)
            except ValueError:
                return DataError(
                    f"{path!r}, line {line}, column {header[i]!r}: "
                    f"{row[i]!r} is not a number ({np.dtype(dtype).name}); time series "
                    "columns must be numeric, with no missing values.")
    return None


def _refuse_non_finite(path: str, text: str, table: np.ndarray, *, delimiter: str,
                       header: List[str], read: List[int]) -> None:
    """Names the first NaN or infinite value of the columns read (`finite_values`' rule:
    numpy reads "nan" and "inf" as numbers, and a NaN would end a run as a NaN loss)."""
    found = finite_values.first_non_finite(table)
    if found is None:
        return
    (row, column), _, count = found
    line, fields = next(itertools.islice(_rows(text, delimiter=delimiter, path=path), row,
                                         None))
    name = header[read[column]]
    raise finite_values.refusal(
        f"Time series CSV file {path!r}, line {line}, column {name!r}",
        repr(fields[read[column]].strip()), count=count,
        fix="Fill the value in (e.g. carry the previous timestep forward) or cut the rows "
            "off.")


def _names(selection: Union[str, Sequence[str]]) -> List[str]:
    return [selection] if isinstance(selection, str) else list(selection)


def read_timeseries_csv(path, *, columns: Union[str, Sequence[str], None],
                        targets: Union[str, Sequence[str], None], delimiter: str = ",",
                        dtype="float32") -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """Reads the data and target columns of a CSV file with a header line, in one pass.

    Args:
        path: The CSV file.
        columns: The data: one column name (a 1-D array, ``[rows]``), a list of names
            (``[rows, len(columns)]``), or None: every column that is not a target.
        targets: The targets, named the same way, or None.
        delimiter: The field separator.
        dtype: The arrays' dtype.

    Returns:
        ``(data, targets)``, one row per line after the header (targets None without).

    Raises:
        DataError: The file is missing, empty, not UTF-8 or cut short (`text_files`), a
            column is not in its header (the columns that are named), a row has another
            number of fields than the header, or a value is not a number or is NaN or
            infinite (file, line and column named).
    """
    path, text, delimiter, header = _read_file(path, delimiter=delimiter)
    target_names = [] if targets is None else _names(targets)
    target_indices = _column_indices(path, header, target_names,
                                     argument=f"targets={targets!r}")
    if columns is None:
        names = [name for name in header if name not in target_names]
        argument = "columns=None (every column but the targets)"
        if not names:
            raise DataError(f"{path!r} has no column left for the data: its columns are "
                            f"{header}, all of them targets ({target_names}).")
    else:
        names, argument = _names(columns), f"columns={columns!r}"
    if not names or (targets is not None and not target_names):
        raise UserInputError(f"columns and targets must each name at least one column; "
                             f"got columns={columns!r}, targets={targets!r} (the columns "
                             f"of {path!r} are {header}).")
    data_indices = _column_indices(path, header, names, argument=argument)
    bad = _first_bad_row(path, text, delimiter=delimiter, header=header)
    if bad is not None:
        raise bad
    read = sorted(set(data_indices + target_indices))
    try:
        # The rows THE reader gives (quotes, CRLF, blank lines as csv sources read them).
        fields = [[row[i] for i in read] for _, row in _rows(text, delimiter=delimiter)]
        table = np.array(fields, dtype=str).reshape(len(fields), len(read)).astype(dtype)
    except ValueError:
        # Name the line and column of the first value that is not a number.
        bad = _first_bad_row(path, text, delimiter=delimiter, header=header, values_of=read,
                             dtype=dtype)
        raise (bad or DataError(f"{path!r} could not be read as numbers in columns "
                                f"{[header[i] for i in read]}.")) from None
    _refuse_non_finite(path, text, table, delimiter=delimiter, header=header, read=read)

    def take(indices, selection):
        picked = table[:, [read.index(i) for i in indices]]
        return picked[:, 0] if isinstance(selection, str) else picked

    return (take(data_indices, columns),
            None if targets is None else take(target_indices, targets))


def from_timeseries_csv(path, *, sequence_length: int,
                        columns: Union[str, Sequence[str], None] = None,
                        targets: Union[str, Sequence[str], None] = None,
                        target_offset: int = 0, delimiter: str = ",", dtype="float32",
                        sequence_stride: int = 1, sampling_rate: int = 1,
                        batch_size: Optional[int] = 128, shuffle: bool = False,
                        seed: Optional[int] = None, start_index: Optional[int] = None,
                        end_index: Optional[int] = None,
                        shuffle_buffer: Optional[int] = None, deterministic: bool = True,
                        drop_remainder: Optional[bool] = None,
                        num_parallel_calls: int = tail.AUTOTUNE,
                        private_threads: Optional[int] = None,
                        ram_budget_bytes: Optional[int] = None,
                        shard_policy: Optional[str] = "data",
                        input_context=None, sequential: bool = False, stream=None, service=None,
                        batch_by_length: bool = False, **unknown) -> tf.data.Dataset:
    """Sliding windows over columns of a CSV file: `from_timeseries` on those columns.

    The file has a header line naming its columns, then one line per timestep. The data
    is ``columns`` and the targets ``targets``, read as numbers; both are then windowed
    exactly as `from_timeseries` (Keras' `timeseries_dataset_from_array`) does with the
    arrays, rows counted from 0 after the header.

    Example::

        # Windows of 48 hourly readings; target: the temperature 6 hours after each
        # window's last step (row start + 47 + 6).
        train = tfaccel.data.from_timeseries_csv(
            "weather.csv", columns=["temp", "pressure", "humidity"], targets="temp",
            target_offset=47 + 6, sequence_length=48, batch_size=64, shuffle=True, seed=0)

    Args:
        path: The CSV file.
        sequence_length: Timesteps (rows) in each window.
        columns: The data: one column name (windows ``[batch, sequence_length]``), a list
            of names (``[batch, sequence_length, len(columns)]``), or None for every
            column that is not a target.
        targets: The target column (targets ``[batch]``), a list of them
            (``[batch, len(targets)]``), or None for windows alone.
        target_offset: The target of the window starting at row ``i`` is row
            ``i + target_offset`` of `targets` (0: Keras' alignment; ``sequence_length``:
            the row right after the window). Windows whose target row is past the end
            of the file are left out.
        delimiter: The field separator.
        dtype: The dtype of data and targets.
        sequence_stride: See `from_timeseries`.
        sampling_rate: See `from_timeseries`.
        batch_size: See `from_timeseries`.
        shuffle: See `from_timeseries`.
        seed: See `from_timeseries`.
        start_index: See `from_timeseries` (in rows).
        end_index: See `from_timeseries` (in rows).
        shuffle_buffer: See `from_timeseries`.
        deterministic: See `from_timeseries`.
        drop_remainder: See `from_timeseries`.
        num_parallel_calls: See `from_timeseries`.
        private_threads: See `from_timeseries`.
        ram_budget_bytes: See `from_timeseries`.
        shard_policy: See `from_timeseries`.
        input_context: See `from_timeseries`.
        sequential: See `from_timeseries`.
        stream: See `from_timeseries`.
        service: See `from_timeseries`.
        batch_by_length: See `from_timeseries`.
        **unknown: As for `from_timeseries`.

    Returns:
        A `tf.data.Dataset` of ``(windows, targets)`` batches (or windows alone), with the
        attribute ``num_windows``.

    Raises:
        DataError: The file is missing or empty, a column is not in it (its columns are
            named), a value is not a number or a row has the wrong number of fields (file
            and line named), or the file has fewer rows than one window needs.
        UserInputError: An argument with a bad value.
    """
    # Before the file is read: a misspelt keyword is named whatever the file holds.
    tail.refuse_unknown(unknown, builder=from_timeseries_csv, refused=_NOT_TAKEN)
    options = tail.TailOptions(
        seed=seed, deterministic=deterministic, shard_policy=shard_policy,
        drop_remainder=drop_remainder, num_parallel_calls=num_parallel_calls,
        private_threads=private_threads, ram_budget_bytes=ram_budget_bytes,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    target_offset = _check_int("target_offset", target_offset, minimum=0)
    data, target_array = read_timeseries_csv(path, columns=columns, targets=targets,
                                             delimiter=delimiter, dtype=dtype)
    if target_array is not None:
        target_array = target_array[target_offset:]
    return windows_dataset(data, target_array, sequence_length,
                           sequence_stride=sequence_stride, sampling_rate=sampling_rate,
                           batch_size=batch_size, shuffle=shuffle,
                           shuffle_buffer=shuffle_buffer, start_index=start_index,
                           end_index=end_index, options=options,
                           where=f"Time series CSV file {os.fspath(path)!r}")


# The tail options a window pipeline does not take: it gathers windows from the rows in
# memory (a cache would only copy them), and the named augmentations are for images.
_RECIPE_OPTIONS_LEFT_OUT = ("cache", "augment", "batch_by_length")


class TimeseriesSource(base.Source):
    """``data.source: timeseries``: windows over the rows of one CSV file, each labelled.

    Without `data.timeseries.horizon`, the label of the window starting at row ``i`` is
    row ``i + target_offset`` of `data.label_key` (one column or a list): classes (integers
    or text, read by `tfaccel.reading.labels`: the sorted distinct values), several 0/1
    labels or numeric targets (regression). With ``horizon: H`` the window forecasts: its
    target is the next H rows of the label column(s) after its last row, one vector of
    ``H * len(label_key)`` values (step by step, each step's columns together), a
    regression. `data.validation_fraction` holds out the LAST ``int(fraction * rows)``
    rows, in time order: training windows and their targets lie wholly before them,
    validation windows and their targets wholly inside them, and the windows that would
    straddle the boundary are left out. Training windows are shuffled (their start
    positions, seeded), among themselves only; `data.cache` does not apply (the rows are
    in memory).
    """

    names = ("timeseries",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config, windows = self.config, self.config.timeseries
        where = f"Time series CSV file {config.path!r}"
        target_names = _names(config.label_key)
        # data.table.delimiter: the one reader's key (auto: detected, as for csv).
        delimiter = csv_files.delimiter_for(
            None if config.table.delimiter == "auto" else config.table.delimiter)
        header, label_text = _label_columns(config.path, target_names, delimiter=delimiter)
        data_names = self._data_columns(header, target_names)
        data, _ = read_timeseries_csv(config.path, columns=data_names, targets=None,
                                      delimiter=delimiter)
        labels = _label_values(label_text, where=f"{where}, data.label_key "
                                                  f"{config.label_key!r}")
        rows = len(data)
        boundary = rows - splits.keras_held_out_count(
            rows, config.validation_fraction, what="rows", argument="data.validation_fraction")
        last_step = (windows.sequence_length - 1) * windows.sampling_rate
        spans = {"train": (0, boundary), "val": (boundary, rows)}
        targets = {name: window_targets(labels[first:last], horizon=windows.horizon,
                                        target_offset=windows.target_offset,
                                        last_step=last_step)
                   for name, (first, last) in spans.items()}
        if windows.horizon is not None:  # step-major vectors: each step's columns together
            targets = {name: t.reshape(len(t), -1) for name, t in targets.items()}
        if not len(targets["train"]):
            raise DataError(
                f"{where}: no training window has a target: the training rows (0 to "
                f"{boundary - 1}) hold {boundary}, and a window with its target needs "
                f"{last_step + 1} + {windows.horizon or 0} rows (sequence_length, "
                "sampling_rate, horizon) or target_offset + 1. Use more rows, shorter "
                "windows or a smaller data.validation_fraction.")
        plan = self._plan(targets["train"], target_names=target_names, where=where)
        # A forecast of the series' own columns is anchored at each window's last value.
        anchor = [data_names.index(name) for name in target_names] \
            if windows.horizon is not None and set(target_names) <= set(data_names) else None
        stats = series_statistics(
            data[:boundary], targets["train"] if plan.task == "regression" else None,
            anchor=anchor, last_step=last_step)

        def split(name, options, *, shuffle, shuffle_buffer, what):
            first, last = spans[name]
            options = common.merged(options).without(_RECIPE_OPTIONS_LEFT_OUT)
            try:
                encoded = plan.encode(targets[name])
            except DataError as error:  # a class first seen in the validation rows
                raise DataError(f"{where}, {what}, data.label_key {config.label_key!r}: "
                                f"{error}") from None
            return windows_dataset(
                data[first:last], encoded,
                windows.sequence_length, sequence_stride=windows.sequence_stride,
                sampling_rate=windows.sampling_rate, batch_size=batch_size,
                shuffle=shuffle, shuffle_buffer=shuffle_buffer, start_index=None,
                end_index=None, options=options, where=f"{what} of {where}")

        # Shuffled among the training windows only: validation is its own later span.
        shuffled = config.shuffle_buffer > 0
        train = split("train", train_options, shuffle=shuffled,
                      shuffle_buffer=config.shuffle_buffer if shuffled else None,
                      what=f"the training rows (0 to {boundary - 1})")
        val = None
        if boundary < rows:
            val = split("val", validation_options, shuffle=False, shuffle_buffer=None,
                        what=f"the validation rows (the last {rows - boundary}, from row "
                             f"{boundary})")
        return base.Built(train=train, validation=val, num_classes=plan.num_classes,
                          class_names=list(plan.class_names) if plan.class_names else None,
                          train_examples=train.num_windows,
                          validation_examples=None if val is None else val.num_windows,
                          task=plan.task, num_outputs=plan.num_outputs,
                          series=SeriesInfo(columns=list(data_names),
                                            targets=target_names, horizon=windows.horizon,
                                            anchor=anchor, **stats))

    def _plan(self, train_targets: np.ndarray, *, target_names, where) -> label_rule.LabelPlan:
        """The task and classes of the training targets (`tfaccel.reading.labels`)."""
        config, horizon = self.config, self.config.timeseries.horizon
        what = f"{where}, data.label_key {config.label_key!r}"
        if horizon is None:
            if train_targets.ndim == 1 and config.task != "regression" \
                    and config.num_classes is None and len(np.unique(train_targets)) == 1 \
                    and (train_targets.dtype.kind != "f"
                         or float(train_targets[0]).is_integer()):
                base.refuse_one_class(1, config=config)  # the message every source gives
            return label_rule.plan_labels(train_targets, task=config.task, where=what,
                                      names=target_names if train_targets.ndim == 2 else None,
                                      num_classes=config.num_classes)
        if config.task not in ("auto", "regression"):
            raise UserInputError(
                f"data.timeseries.horizon is {horizon} (forecast the next {horizon} rows of "
                f"{config.label_key!r}), a regression, but data.task is {config.task!r}. "
                "Set data.task: regression (or auto), or leave horizon empty and label "
                "each window by one row (data.timeseries.target_offset).")
        if train_targets.dtype.kind not in "iufb":
            raise DataError(
                f"{what} holds text ({', '.join(map(repr, train_targets[:3].ravel()[:3]))}, ...); "
                f"data.timeseries.horizon forecasts numbers. To classify windows by a text "
                "label, leave horizon empty (the label is row i + target_offset).")
        names = [f"{name}+{step}" for step in range(1, horizon + 1) for name in target_names]
        return label_rule.plan_labels(train_targets.reshape(len(train_targets), -1),
                                  task="regression", where=what, names=names)

    def _data_columns(self, header: List[str], target_names: List[str]) -> List[str]:
        """The window's columns: data.timeseries.columns, else every column but the labels
        (with a horizon: every column, the forecast series' own past included)."""
        config, windows = self.config, self.config.timeseries
        if windows.columns:
            names = list(windows.columns)
        elif windows.horizon is not None:
            names = list(header)
        else:
            names = [name for name in header if name not in target_names]
        self._check_columns(names, target_names)
        if not names:
            raise DataError(f"Time series CSV file {config.path!r} has no column left for "
                            f"the data: its columns are {header}, all of them labels "
                            f"(data.label_key {config.label_key!r}).")
        return names

    def _check_columns(self, names: List[str], target_names: List[str]) -> None:
        """A label column among the data columns only where the window cannot see its
        label row (a forecast: the label rows come after the window)."""
        windows = self.config.timeseries
        if windows.horizon is not None:
            return
        last_step = (windows.sequence_length - 1) * windows.sampling_rate
        inside = [name for name in target_names if name in names]
        if inside and windows.target_offset <= last_step:
            raise UserInputError(
                f"data.timeseries.columns {names} includes the label column "
                f"{inside[0]!r} (data.label_key), and each window's label row (its "
                f"row {windows.target_offset}, data.timeseries.target_offset) lies inside "
                f"the window (rows 0 to {last_step}): the model would read its own label. "
                "Leave the label column out of data.timeseries.columns, or set "
                f"target_offset above {last_step} (or data.timeseries.horizon) to "
                "forecast it.")


def window_targets(labels: np.ndarray, *, horizon: Optional[int], target_offset: int,
                   last_step: int) -> np.ndarray:
    """``targets[i]``: the target of the window starting at row ``i`` of `labels`' span.

    Without a horizon, row ``i + target_offset`` of `labels`; with one, the next `horizon`
    rows after the window's last row (``i + last_step``), as ``[rows, horizon]`` for one
    label column and ``[rows, horizon, columns]`` for several. Windows whose target rows
    run past the span get none (`window_starts` then leaves them out), so no target is
    ever read across a split's end.

    Args:
        labels: The label column(s) of one split's rows, ``[rows]`` or ``[rows, columns]``.
        horizon: Rows forecast after each window (None: one label row).
        target_offset: The label row of a window, counted from its first row.
        last_step: Rows from a window's first row to its last, ``(sequence_length - 1) *
            sampling_rate``.
    """
    if horizon is None:
        return labels[target_offset:]
    ahead = labels[last_step + 1:]
    if len(ahead) < horizon:
        return ahead[:0].reshape((0, horizon) + labels.shape[1:])
    # [n, horizon] for one column; [n, columns, horizon] -> [n, horizon, columns].
    stacked = np.lib.stride_tricks.sliding_window_view(ahead, horizon, axis=0)
    return np.ascontiguousarray(stacked if stacked.ndim == 2
                                else np.swapaxes(stacked, 1, 2))


def series_statistics(data: np.ndarray, targets: Optional[np.ndarray], *,
                      anchor: Optional[List[int]] = None, last_step: int = 0) -> dict:
    """Mean and standard deviation of each data column over the training rows, and of each
    target value over the training windows' targets (float64 sums, a zero deviation
    taken as 1): what a model's Normalization layers are set with, so a window keeps its
    level and a forecast comes out in the target's own units.

    With `anchor` (the data column of each target column), the target statistics are
    those of the change from the window's last value of that column (row ``i +
    last_step`` for the window starting at row ``i``): what forecast_mlp predicts.
    """
    def moments(values):
        values = np.asarray(values, np.float64).reshape(len(values), -1)
        std = values.std(axis=0)
        return values.mean(axis=0).tolist(), np.where(std > 0, std, 1.0).tolist()

    input_mean, input_std = moments(data)
    stats = {"input_mean": input_mean, "input_std": input_std,
             "target_mean": None, "target_std": None}
    if targets is not None and len(targets):
        values = np.asarray(targets, np.float64).reshape(len(targets), -1)
        if anchor is not None:
            last = data[last_step:last_step + len(values)][:, anchor].astype(np.float64)
            values = values - np.tile(last, values.shape[1] // len(anchor))
        stats["target_mean"], stats["target_std"] = moments(values)
    return stats


def _read_file(path, *, delimiter: Optional[str]) -> Tuple[str, str, str, List[str]]:
    """``(path, text, delimiter, header)`` of a time series CSV file, read once.

    text_files: UTF-8 named by file and line, a byte-order mark dropped, a .gz or .zz file
    decompressed and a cut-short one named; parsed from memory. `delimiter` None: detected.

    Raises:
        DataError: The file is missing (or a folder), or cannot be read as text.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"Time series CSV file {path!r} does not exist"
                        + (" (it is a folder)." if os.path.isdir(path) else "."))
    text = text_files.read_text(path, compression=text_files.compression_of(path),
                                what="Time series CSV file", takes_encoding=False)
    if delimiter is None:
        delimiter = csv_files.sniff(text)
    return path, text, delimiter, _header(path, text, delimiter=delimiter)


def _label_columns(path, names: List[str], *, delimiter: Optional[str] = ","
                   ) -> Tuple[List[str], np.ndarray]:
    """The header and the label columns' fields as text, ``[rows, len(names)]``.

    Labels may be text (`species`), which the numeric reader refuses, so they are read
    apart, by THE reader's rules (`tfaccel.reading.csv_files`: the same rows, blank lines
    skipped, values stripped); `delimiter` None: detected.

    Raises:
        DataError: As `read_timeseries_csv` (a missing file, a label column not in the
            header, a row with another number of fields than the header).
    """
    path, text, delimiter, header = _read_file(path, delimiter=delimiter)
    indices = _column_indices(path, header, names, argument=f"data.label_key {names!r}")
    bad = _first_bad_row(path, text, delimiter=delimiter, header=header)
    if bad is not None:
        raise bad
    fields = [[row[i].strip() for i in indices]
              for _, row in _rows(text, delimiter=delimiter, path=path)]
    return header, np.array(fields, dtype=str).reshape(len(fields), len(names))


def _label_values(text: np.ndarray, *, where: str) -> np.ndarray:
    """Numbers where every field is one (NaN and infinity refused), else the text (a
    classification's string labels); one column as ``[rows]``."""
    column = text[:, 0] if text.shape[1] == 1 else text
    try:
        values = column.astype(np.float64)
    except ValueError:
        if text.shape[1] > 1 or any(finite_values.is_non_finite_number(v) for v in column):
            # Several columns are 0/1 labels or targets: a word there is a bad value.
            values = None
        else:
            return column
    if values is None:
        for row, fields in enumerate(np.atleast_2d(text)):
            for value in fields:
                try:
                    float(value)
                except ValueError:
                    raise DataError(f"{where}: row {row} (rows counted from 0 after the "
                                    f"header) holds {value!r}, not a number.") from None
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argmax(bad.reshape(len(values), -1).any(axis=1)))
        raise finite_values.refusal(f"{where}, row {row}", repr(text[row].tolist()),
                                    count=int(bad.sum()))
    return values

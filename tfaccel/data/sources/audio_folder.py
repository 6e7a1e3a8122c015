"""A folder of WAV files, one sub-folder per class, as a batched tf.data pipeline of waveforms."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import struct
from collections import Counter
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfaccel.data import resample, tail
from tfaccel.data.sources import base, class_folder
from tfaccel.errors import DataError, UserInputError

logger = logging.getLogger(__name__)

AUDIO_EXTENSIONS = (".wav",)  # Keras' only format
# Chunks tf.audio.decode_wav skips between "WAVE" and "fmt " (any other one is an error).
_CHUNKS_BEFORE_FORMAT = (b"JUNK", b"bext", b"iXML", b"qlty", b"mext", b"levl", b"link",
                         b"axml")
_INT32_MAX = 2**31 - 1


class WavHeader(NamedTuple):
    """What the header of a WAV file that `tf.audio.decode_wav` reads says.

    Attributes:
        channels: Channels (the last dimension of the decoded waveform).
        sample_rate: Samples per second (per channel).
        frames: Samples per channel (the first dimension of the decoded waveform).
        data_offset: Where the samples start in the file, in bytes.
    """

    channels: int
    sample_rate: int
    frames: int
    data_offset: int


def read_wav_header(path: str) -> Tuple[Optional[WavHeader], str]:
    """Reads a WAV file's header with `tf.audio.decode_wav`'s own rules, without its samples.

    The rules are those of TensorFlow's parser (core/lib/wav/wav_io.cc): "RIFF"/"WAVE",
    only the chunks it skips before "fmt ", a 16- or 18-byte PCM format chunk of 16-bit
    samples with consistent block and byte rates, then chunks up to the file's end with
    exactly one "data" chunk whose samples are all there. A file that passes decodes; one
    that fails would stop an epoch. Only the chunk headers are read (a few seeks), not the
    samples.

    Returns:
        ``(header, "")`` for a file that decodes, ``(None, reason)`` otherwise.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            return _parse_wav(f, size)
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"


def _parse_wav(f, size: int) -> Tuple[Optional[WavHeader], str]:
    def read(n: int) -> Optional[bytes]:
        data = f.read(n)
        return data if len(data) == n else None

    head = read(16)
    if head is None or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None, "not a RIFF/WAVE file"
    chunk = head[12:16]
    while chunk != b"fmt ":
        if chunk not in _CHUNKS_BEFORE_FORMAT:
            return None, f"unexpected {chunk!r} chunk before the format chunk"
        length = read(4)
        if length is None or f.tell() + struct.unpack("<I", length)[0] > size:
            return None, "cut short"
        f.seek(struct.unpack("<I", length)[0], os.SEEK_CUR)
        chunk = read(4)
        if chunk is None:
            return None, "cut short"
    fmt = read(20)
    if fmt is None:
        return None, "cut short"
    (fmt_size, audio_format, channels, rate, byte_rate, block_align,
     bits) = struct.unpack("<IHHIIHH", fmt)
    if fmt_size not in (16, 18):
        return None, f"a format chunk of {fmt_size} bytes (16 or 18 are read)"
    if audio_format != 1:
        return None, f"audio format {audio_format}, not 1 (integer PCM)"
    if channels < 1:
        return None, "0 channels"
    if bits != 16:
        return None, f"{bits}-bit samples (tf.audio.decode_wav reads 16-bit PCM only)"
    if block_align != 2 * channels or byte_rate != block_align * rate:
        return None, "inconsistent block size or byte rate in the format chunk"
    offset = f.tell() + (2 if fmt_size == 18 else 0)
    frames = data_offset = None
    while offset < size:
        f.seek(offset)
        header = read(8)
        if header is None:
            return None, "cut short (a partial chunk header at the end)"
        chunk, length = header[:4], struct.unpack("<I", header[4:])[0]
        offset += 8
        if length > _INT32_MAX:
            return None, f"a {chunk!r} chunk of {length} bytes"
        if chunk == b"data":
            if frames is not None:
                return None, "more than one data chunk"
            frames, data_offset = length // block_align, offset
            offset += 2 * frames * channels  # the parser reads whole frames only
            if offset > size:
                return None, "cut short (fewer samples than its data chunk says)"
        else:
            offset += length
    if frames is None:
        return None, "no data chunk"
    return WavHeader(channels, rate, frames, data_offset), ""


class _HeaderCheck:
    """`Kind.check` for WAV files: keeps each file's header, or why it cannot be read."""

    def __init__(self):
        self.headers: Dict[str, WavHeader] = {}
        self.reasons: Dict[str, str] = {}

    def __call__(self, path: str) -> bool:
        header, reason = read_wav_header(path)
        if header is None:
            self.reasons[path] = reason
            return False
        self.headers[path] = header
        return True


def _audio_kind(check) -> class_folder.Kind:
    # "directory": Keras' wording ("No audio files found in directory ..."), which its
    # tests match.
    return class_folder.Kind(
        extensions=AUDIO_EXTENSIONS, noun="audio files", files="audio files",
        folder="Directory", usable="16-bit PCM .wav file", check=check)


class AudioListing(NamedTuple):
    """A listed audio folder: the class-folder listing and every usable file's header."""

    listing: class_folder.Listing
    headers: Dict[str, WavHeader]
    reasons: Dict[str, str]


def list_audio_folder(path, *, verify: bool = True,
                      class_names: Optional[Sequence[str]] = None,
                      follow_links: bool = False,
                      labels: Union[str, Sequence[int], None] = "inferred") -> AudioListing:
    """Lists an audio folder's .wav files in Keras' order, reading each one's header.

    See `class_folder.list_class_folder` for the arguments. A file whose header
    `tf.audio.decode_wav` would refuse (`read_wav_header`) is left out; with labels from
    the sub-folders, a class sub-folder without a usable file is refused.

    Raises:
        DataError: As `list_class_folder`, and a class sub-folder without a usable file.
    """
    check = _HeaderCheck()
    kind = _audio_kind(check)
    listing = class_folder.list_class_folder(
        path, kind=kind, verify=verify, class_names=class_names, follow_links=follow_links,
        labels=labels)
    class_folder.refuse_empty_classes(listing, path=path, kind=kind, labels=labels)
    # In listing order (the checks finish in any order), so messages name the first file.
    return AudioListing(listing,
                        {p: check.headers[p] for p in listing.paths if p in check.headers},
                        {p: check.reasons[p] for p in listing.paths if p in check.reasons})


def _one_value(headers: Dict[str, WavHeader], field: str, *, path, unit: str) -> Optional[int]:
    """The one `field` every file has, or a `DataError` naming a file of each value."""
    counts = Counter(getattr(h, field) for h in headers.values())
    if len(counts) <= 1:
        return next(iter(counts), None)
    example = {}
    for file, header in headers.items():
        example.setdefault(getattr(header, field), file)
    found = ", ".join(f"{n} file(s) at {value} {unit}, e.g. {example[value]!r}"
                      for value, n in counts.most_common())
    raise DataError(
        f"The WAV files of {os.fspath(path)!r} have mixed {field.replace('_', ' ')}s: "
        f"{found}. Every example of a dataset must have the same {field.replace('_', ' ')} "
        "(tfaccel resamples one rate to `sampling_rate`, and does not remix); convert the "
        "files first, e.g. with "
        "`sox in.wav -r 16000 -c 1 out.wav` or `ffmpeg -i in.wav -ar 16000 -ac 1 out.wav`.")


def _check_rates(audio: AudioListing, *, path) -> None:
    """One sample rate and one channel count in the dataset (the rate `sampling_rate`
    resamples from: `tfaccel.data.resample`)."""
    _one_value(audio.headers, "sample_rate", path=path, unit="Hz")
    _one_value(audio.headers, "channels", path=path, unit="channel(s)")


def _check_audio_arguments(*, sampling_rate, output_sequence_length, ragged) -> None:
    """Keras' checks (and wording) of `sampling_rate`, `output_sequence_length`, `ragged`."""
    if ragged and output_sequence_length is not None:
        raise UserInputError("Cannot set both `ragged` and `output_sequence_length` (a "
                             "ragged batch keeps each waveform's own length); got "
                             f"output_sequence_length={output_sequence_length!r}.")
    if output_sequence_length is not None and (
            isinstance(output_sequence_length, bool)
            or not isinstance(output_sequence_length, int) or output_sequence_length < 1):
        raise UserInputError(f"output_sequence_length must be a positive integer or None, "
                             f"got output_sequence_length={output_sequence_length!r}.")
    if sampling_rate is not None:
        if isinstance(sampling_rate, bool) or not isinstance(sampling_rate, int):
            raise UserInputError("`sampling_rate` should have an integer value. Received: "
                                 f"sampling_rate={sampling_rate!r}")
        if sampling_rate <= 0:
            raise UserInputError("`sampling_rate` should be higher than 0. Received: "
                                 f"sampling_rate={sampling_rate!r}")


def _decoder(*, output_sequence_length: Optional[int], ragged: bool, headers_known: bool,
             rates: Optional[Tuple[int, int]] = None):
    """``fn(source[, label]) -> (waveform[, label])``: Keras' decode of one file.

    The waveform is float32 ``[samples, channels]`` in [-1, 1), cut or zero-padded to
    `output_sequence_length`; with `ragged`, a RaggedTensor made like Keras'
    (``RaggedTensor.from_tensor``), so batches have Keras' spec. With `rates` ``(files',
    wanted)`` it is resampled first (`tfaccel.data.resample`; only the samples that decide
    the first `output_sequence_length` are read) and then cut or padded at the new rate.

    With `headers_known`, `source` is ``{"path", "offset", "frames", "channels"}`` from
    the checked headers and the samples are read as they are stored: `decode_raw` of the
    int16 data, times 2**-15, TensorFlow's own conversion (`tf.audio.decode_wav`'s
    values, bit for bit: tested), only the frames kept. Measured 1.4x the waveforms/s of
    `decode_wav`, whose per-sample loop is the cost on 2 cores
    (benchmarks/bench_data_audio.py). Otherwise `source` is the path, for `decode_wav`.
    """
    desired = -1 if output_sequence_length is None else output_sequence_length
    wanted = desired  # samples at the output rate
    if rates is not None and desired >= 0:
        desired = resample.frames_needed(wanted, orig=rates[0], target=rates[1])

    def stored(source):
        frames = source["frames"]
        if desired >= 0:
            frames = tf.minimum(frames, desired)
        samples = tf.io.decode_raw(
            tf.strings.substr(tf.io.read_file(source["path"]), source["offset"],
                              2 * frames * source["channels"]), tf.int16, little_endian=True)
        # Channels from the element, not a constant: unknown in the spec, as Keras'.
        audio = tf.reshape(tf.cast(samples, tf.float32) * (1.0 / 32768.0),
                           tf.stack([frames, source["channels"]]))
        if desired >= 0 and rates is None:
            audio = tf.pad(audio, [[0, desired - frames], [0, 0]])
            audio.set_shape([desired, None])
        return audio

    def decode(source, label=None):
        if headers_known:
            audio = stored(source)
        else:
            audio, _ = tf.audio.decode_wav(tf.io.read_file(source), desired_samples=desired)
        if rates is not None:  # the waveform resampled whole, then cut or padded
            audio = resample.resample(audio, orig=rates[0], target=rates[1])
            if wanted >= 0:
                audio = audio[:wanted]
                audio = tf.pad(audio, [[0, wanted - tf.shape(audio)[0]], [0, 0]])
                audio.set_shape([wanted, None])
        if ragged:
            audio = tf.RaggedTensor.from_tensor(audio)
        return audio if label is None else (audio, label)

    return decode


def from_audio_folder(directory, labels: Union[str, Sequence[int], None] = "inferred", *,
                      label_mode: Optional[str] = "int",
                      class_names: Optional[Sequence[str]] = None,
                      batch_size: Optional[int] = 32, sampling_rate: Optional[int] = None,
                      output_sequence_length: Optional[int] = None, ragged: bool = False,
                      shuffle: bool = True, seed: Optional[int] = None,
                      validation_split: Optional[float] = None, subset: Optional[str] = None,
                      follow_links: bool = False, verbose: bool = True, format: str = "tf",
                      verify: bool = True,
                      shuffle_buffer: Optional[int] = None, cache=None,
                      deterministic: Optional[bool] = None,
                      augment=None, augment_on="batch", drop_remainder=None,
                      num_parallel_calls=tail.AUTOTUNE, private_threads=None,
                      ram_budget_bytes=None, shard_policy=None, image_dtype="float32",
                      input_context=None, sequential=False, stream=None, service=None,
                      batch_by_length=False, **unknown):
    """Builds batches of ``(waveform, label)`` from ``directory/<class name>/<file>.wav``.

    Example::

        train, val = tfaccel.data.from_audio_folder(
            "speech_commands", batch_size=64, output_sequence_length=16000,
            validation_split=0.2, subset="both", seed=1)
        print(train.class_names)   # ['down', 'go', 'left', ...]

    A drop-in for `keras.utils.audio_dataset_from_directory` (Keras' own tests of it run
    against this function: tests/test_audio_folder_keras_suite.py): the same
    arguments, defaults, checks and error wording (a `UserInputError` is a `ValueError`),
    and the same files, order and output. The listing is Keras' (sorted classes, sorted
    walk), permuted by Keras' seeded rule when shuffling; `validation_split` holds out the
    last ``int(validation_split * n)`` of it; the paths are shuffled before reading with
    Keras' buffer (``8 * batch_size``, 1024 unbatched) and seed, so with a `seed` the
    batches are Keras' batches, element for element. Each file is decoded by
    `tf.audio.decode_wav` in a parallel map (AUTOTUNE), cut or zero-padded to
    `output_sequence_length`; without it batches are zero-padded to their longest
    waveform (or ragged with ``ragged=True``); batches are prefetched.

    Differences from Keras' loader:

    - `sampling_rate` is resampled to by tfaccel itself (`tfaccel.data.resample`: the
      filter of ``scipy.signal.resample_poly`` in TensorFlow ops), where Keras needs
      tensorflow-io, which has no release for this TensorFlow. `output_sequence_length`
      then counts samples at `sampling_rate` (Keras cuts at the files' rate, then
      resamples); it needs `verify` (the rate comes from the headers).
    - The files of one dataset must share one sample rate and one channel count (Keras
      mixes rates silently, and fails mid-epoch on mixed channel counts when batching): a
      `DataError` naming a file of each.
    - Every file's header is checked before training with `tf.audio.decode_wav`'s own
      rules (`read_wav_header`: a few bytes of each file): a file it would refuse (not
      16-bit PCM, cut short, not a WAV) is skipped and named, with the reason, in ONE
      warning, where Keras' epoch stops at it.
    - A class sub-folder without a usable .wav file is a `DataError` (Keras yields no
      example of that class and says nothing). Hidden files (``.name.wav``) are not
      listed.

    Args:
        directory: Root folder; each sub-folder is a class, classes sorted by name.
        labels: "inferred" (from the sub-folders), None (every .wav file below
            `directory`, without labels), or a list of integer labels, one per .wav file
            in Keras' listing order (class names: the distinct labels as strings). A file
            skipped as unreadable is left out with its label.
        label_mode: "int" (int32 [B]), "categorical" (one-hot float32 [B, classes]),
            "binary" (float32 [B, 1], two classes only) or None (waveforms alone).
        class_names: Use only these sub-folders, labelled in this order (only with
            ``labels="inferred"``).
        batch_size: The GLOBAL batch size; None yields single waveforms (unbatched).
        sampling_rate: The waveforms' sample rate in Hz: the files are resampled to it
            (above). None: the files' own rate.
        output_sequence_length: Cut or zero-pad every waveform to this many samples (at
            `sampling_rate`).
            None: each batch is zero-padded to its longest waveform.
        ragged: Batches as RaggedTensors ``[B, (samples), (channels)]``, each waveform at
            its own length (not with `output_sequence_length`).
        shuffle: Shuffle the files (False: Keras' listing order, kept by the parallel
            decode).
        seed: Seeds the listing's permutation and the shuffle (None: different every
            run). Needed with `validation_split` when shuffling, as in Keras.
        validation_split: Fraction of the files held out (Keras' rule, above).
        subset: "training", "validation", "both" (the pair, from one listing) or None.
        follow_links: Descend into symbolic links to folders (default False, as Keras).
        verbose: Print Keras' "Found N files belonging to K classes." line and, where a
            fraction is held out, its "Using N files for training." / "... for
            validation." lines.
        format: Keras' "tf" (a `tf.data.Dataset`, the only one made); "grain" is refused.
        verify: Check every file's header before training (above). False: no check, no
            rate or channel check; a file that fails to decode is skipped by the
            pipeline (logged by tf.data).
        shuffle_buffer: Examples in the shuffle buffer (None: Keras' size, above): over
            paths before decoding without `cache`, over waveforms after it with one.
        cache: None, ``"memory"`` or a file path; see `tfaccel.data.optimize`. A file cache
            is fingerprinted with the files (names, sizes, times), their order and every
            decode setting.
        deterministic: Keep the element order fixed (None: when a `seed` is given or not
            shuffling, as Keras' loader; otherwise waveforms are handed out as they are
            decoded).
        augment: Augmentation names or a callable (`optimize`'s `augment`).
        augment_on: Where a callable `augment` runs (`optimize`'s `augment_on`).
        drop_remainder: None: True when more than one replica is in sync.
        num_parallel_calls: Parallelism of the maps (AUTOTUNE).
        private_threads: As `optimize`'s.
        ram_budget_bytes: As `optimize`'s.
        shard_policy: As `optimize`'s.
        image_dtype: uint8 images are cast to this dtype after the cache (None: kept uint8).
        input_context: From ``distribute_datasets_from_function`` (`optimize`'s).
        sequential: The benchmarks' truly sequential pipeline (`optimize`'s).
        stream: An `EpochStream`: a resumable stream of passes (`optimize`'s).
        service: A `ServiceTarget`: run the tail on a tf.data service (`optimize`'s).
        batch_by_length: Batch texts and sequences of similar length together (`optimize`'s).
        **unknown: Refused, naming the nearest keyword (`tail.refuse_unknown`).

    Returns:
        A `tf.data.Dataset` of ``(waveforms float32 [B, samples, channels], labels)``
        (waveforms alone with ``label_mode=None``; no B with ``batch_size=None``) with
        attributes ``class_names``, ``file_paths``, ``skipped_files``, ``sample_rate`` and
        ``channels`` (the waveforms' rate, `sampling_rate` if given, and the files'
        channel count; None without `verify`); with
        ``subset="both"`` a ``(training, validation)`` pair.

    Raises:
        DataError: Missing directory, no class sub-folders, a class sub-folder or the whole
            folder without a usable .wav file, mixed sample rates or channel counts.
        UserInputError: A bad argument value.
    """
    class_folder.check_format(format)
    tail.refuse_unknown(unknown, builder=from_audio_folder)
    options = tail.TailOptions(
        seed=seed, cache=cache, deterministic=deterministic, augment=augment,
        augment_on=augment_on, drop_remainder=drop_remainder,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return audio_folder_dataset(
        directory, labels, label_mode=label_mode, class_names=class_names,
        batch_size=batch_size, sampling_rate=sampling_rate,
        output_sequence_length=output_sequence_length, ragged=ragged, shuffle=shuffle,
        validation_split=validation_split, subset=subset, follow_links=follow_links,
        verbose=verbose, verify=verify, shuffle_buffer=shuffle_buffer, options=options)


def audio_folder_dataset(directory, labels: Union[str, Sequence[int], None] = "inferred", *,
                         options: tail.TailOptions, label_mode: Optional[str] = "int",
                         class_names: Optional[Sequence[str]] = None,
                         batch_size: Optional[int] = 32, sampling_rate: Optional[int] = None,
                         output_sequence_length: Optional[int] = None, ragged: bool = False,
                         shuffle: bool = True, validation_split: Optional[float] = None,
                         subset: Optional[str] = None, follow_links: bool = False,
                         verbose: bool = True, verify: bool = True,
                         shuffle_buffer: Optional[int] = None):
    """`from_audio_folder` with the tail's options as one `TailOptions` (what the source
    calls; ``deterministic`` None or unset: as `from_audio_folder`'s None); the other
    arguments and their defaults as `from_audio_folder`'s."""
    # The caller's own order switch (None: decided per subset), then only what the caller
    # chose: the loader decides the rest (the shard policy).
    deterministic = None if options.deterministic is tail.UNSET else options.deterministic
    options = options.without(["deterministic"]).chosen()
    seed, cache = options.resolved().seed, options.resolved().cache
    label_mode, labels = class_folder.check_label_arguments(
        label_mode=label_mode, labels=labels, files="audio files")
    _check_audio_arguments(sampling_rate=sampling_rate,
                           output_sequence_length=output_sequence_length, ragged=ragged)
    _resampled(set(), sampling_rate=sampling_rate, verify=verify)
    shuffle_buffer = class_folder.keras_shuffle_buffer(
        shuffle=shuffle, shuffle_buffer=shuffle_buffer, batch_size=batch_size,
        validation_split=validation_split, subset=subset, seed=seed)
    audio = list_audio_folder(directory, verify=verify, class_names=class_names,
                              follow_links=follow_links, labels=labels)
    listing = audio.listing
    _check_rates(audio, path=directory)
    class_folder.check_binary(listing, label_mode=label_mode, path=directory)
    _warn_skipped(audio, path=directory)
    if verbose:
        class_folder.say_found(listing)
    rates = {h.sample_rate for h in audio.headers.values()}
    channels = {h.channels for h in audio.headers.values()}
    resampled = _resampled(rates, sampling_rate=sampling_rate, verify=verify)
    read = functools.partial(
        _audio_dataset, listing=listing, label_mode=label_mode, batch_size=batch_size,
        map_fn=_decoder(output_sequence_length=output_sequence_length, ragged=ragged,
                        headers_known=verify, rates=resampled),
        fingerprint={"builder": "from_audio_folder",
                     "output_sequence_length": output_sequence_length, "ragged": ragged,
                     **({"resampled": list(resampled)} if resampled else {}),
                     **class_folder.labels_fingerprint(labels, cache)},
        shuffled=shuffle_buffer != 0, deterministic=deterministic,
        sample_rate=sampling_rate or (rates.pop() if rates else None),
        channels=channels.pop() if channels else None,
        headers=audio.headers if verify else None,
        # Every header was checked with the decoder's own rules, so no ignore_errors stage
        # (a serial stage); without the check, a file that fails is skipped there.
        ignore_decode_errors=not verify,
        # Keras' batches: zero-padded to the longest waveform of each batch, or to
        # output_sequence_length (the channels are not static, as in Keras).
        padded_batch=not ragged)
    return class_folder.keras_subsets(listing, read, subset=subset,
                                      validation_split=validation_split, seed=seed,
                                      shuffle_buffer=shuffle_buffer,
                                      noun="audio files", options=options,
                                      verbose=verbose)


def _resampled(rates: set, *, sampling_rate: Optional[int],
               verify: bool) -> Optional[Tuple[int, int]]:
    """``(the files' rate, sampling_rate)`` when they differ, else None (nothing to do).

    Called before the listing (with no `rates`) too: the filter is designed from the rate
    the header check reads, so `sampling_rate` needs `verify`.
    """
    if sampling_rate is None:
        return None
    if not verify:
        raise UserInputError(
            f"sampling_rate={sampling_rate} needs verify=True: tfaccel resamples from the "
            "rate the header check reads (verify=False reads no header); pass verify=True "
            "or sampling_rate=None.")
    rate = next(iter(rates), sampling_rate)  # one rate (checked); no file: nothing to read
    return None if rate == sampling_rate else (rate, sampling_rate)


def _warn_skipped(audio: AudioListing, *, path) -> None:
    """ONE warning for every file left out, each unreadable one with its reason."""
    class_folder.warn_skipped(
        logger, audio.listing, path=path, extension=".wav", reasons=audio.reasons,
        unreadable="that tf.audio.decode_wav cannot read (it reads 16-bit PCM WAV only)")


def _audio_dataset(paths: List[str], labels: List[int], *, sample_rate: Optional[int],
                   channels: Optional[int], headers: Optional[Dict[str, WavHeader]],
                   **kwargs):
    """The pipeline of one subset's chosen files (see `from_audio_folder`)."""
    per_file = None
    if headers is not None:  # where each file's samples are (see _decoder)
        per_file = {"offset": [headers[p].data_offset for p in paths],
                    "frames": [headers[p].frames for p in paths],
                    "channels": [headers[p].channels for p in paths]}
    dataset = class_folder.paths_dataset(paths, labels, per_file=per_file, **kwargs)
    dataset.sample_rate = sample_rate
    dataset.channels = channels
    return dataset


class AudioFolderSource(base.Source):
    """``data.source: audio_folder``: one 16-bit PCM ``.wav`` file per example, in class
    sub-folders.

    `data.validation_fraction` holds out Keras' files, as for text folders
    (`class_folder.build_keras_splits`). Waveforms are cut or zero-padded to
    `data.audio.output_sequence_length`, or each batch is zero-padded to its own longest
    waveform (length-sorted batches with `data.text.batch_by_length`). Every file's header
    is read up front: one sample rate and one channel count in the folder, or a
    `DataError`.
    """

    names = ("audio_folder",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        built = class_folder.build_keras_splits(
            audio_folder_dataset, self.config, batch_size=batch_size, common=common,
            train_options=train_options, validation_options=validation_options,
            output_sequence_length=self.config.audio.output_sequence_length,
            sampling_rate=self.config.audio.sampling_rate)
        # Keras' spec leaves the channels unknown; a model's input needs them (the headers
        # say how many: one count per folder).
        channels = built.train.channels

        def with_channels(dataset):
            if dataset is None:
                return None
            length = self.config.audio.output_sequence_length
            return dataset.map(lambda audio, label: (
                tf.ensure_shape(audio, [None, length, channels]), label))

        return dataclasses.replace(built, train=with_channels(built.train),
                                   validation=with_channels(built.validation))

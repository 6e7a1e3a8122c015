"""from_audio_folder beside keras.utils.audio_dataset_from_directory: same files, order, output."""

import logging
import struct

import audio_helpers
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import EpochStream, from_audio_folder
from tfaccel.data.sources.audio_folder import _decoder, read_wav_header
from tfaccel.errors import DataError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

CLASSES = ("down", "go", "up")
RATE = audio_helpers.RATE
_wav, _write = audio_helpers.wav, audio_helpers.write


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech")
    rng = np.random.default_rng(0)
    for c in CLASSES:
        for i in range(4 + 2 * CLASSES.index(c)):  # 4, 6, 8 files: unequal classes
            sub = "nested" if i % 4 == 3 else ""  # a few in a sub-folder of the class
            _write(root / c / sub / f"{i:02d}.wav",
                   _wav(int(rng.integers(5, 60)), seed=int(rng.integers(1 << 30))))
    _write(root / "go" / "notes.md", b"not a .wav file")
    return root


def _values(x):
    if isinstance(x, tf.RaggedTensor):
        return x.to_list()
    return x.numpy().tolist()


def _all(ds, labelled=True):
    """Every batch of a dataset as Python lists, in order."""
    if not labelled:
        return [_values(x) for x in ds]
    return [(_values(x), _values(y)) for x, y in ds]


@pytest.mark.parametrize("kwargs", [
    {"shuffle": False},
    {"seed": 3},  # shuffled: Keras' permutation and Keras' buffer and seed
    {"seed": 3, "output_sequence_length": 20},  # cut and zero-padded by the decoder
    {"seed": 4, "ragged": True, "label_mode": "categorical"},
    {"seed": 5, "batch_size": None, "label_mode": None},
    {"shuffle": False, "label_mode": "binary", "class_names": ["up", "down"]},
    {"seed": 1, "batch_size": 4, "validation_split": 0.25, "subset": "training"},
    {"seed": 1, "batch_size": 4, "validation_split": 0.25, "subset": "validation"},
])
def test_same_waveforms_labels_and_order_as_keras(folder, kwargs):
    kwargs = {"batch_size": 5, **kwargs}
    theirs = keras.utils.audio_dataset_from_directory(folder, verbose=False, **kwargs)
    ours = from_audio_folder(folder, verbose=False, **kwargs)
    assert ours.element_spec == theirs.element_spec
    assert ours.class_names == theirs.class_names
    labelled = kwargs.get("label_mode", "int") is not None
    # Element by element, in Keras' order (two epochs: the reshuffle is Keras' too).
    assert _all(ours, labelled) == _all(theirs, labelled)
    assert _all(ours, labelled) == _all(theirs, labelled)


def test_subset_both_is_keras_pair_and_disjoint(folder):
    kwargs = dict(batch_size=4, validation_split=0.3, subset="both", seed=7)
    ours = from_audio_folder(folder, verbose=False, **kwargs)
    theirs = keras.utils.audio_dataset_from_directory(folder, verbose=False, **kwargs)
    for o, t in zip(ours, theirs):
        assert _all(o) == _all(t)
    train, val = ours
    assert len(train.file_paths) == 13 and len(val.file_paths) == 5  # int(0.3 * 18) = 5
    assert set(train.file_paths).isdisjoint(val.file_paths)


def test_attributes_and_verbose_line(folder, capsys):
    ds = from_audio_folder(folder, batch_size=4, seed=0)
    assert "Found 18 files belonging to 3 classes." in capsys.readouterr().out
    assert ds.class_names == list(CLASSES) and ds.sample_rate == RATE
    assert len(ds.file_paths) == 18 and ds.skipped_files[0].endswith("notes.md")
    x, y = next(iter(ds))
    assert x.dtype == tf.float32 and x.shape[0] == 4 and x.shape[2] == 2


def test_sampling_rate_equal_to_the_files_rate_reads_them_as_they_are(folder):
    # Keras needs tensorflow-io for any sampling_rate; here it is a check of the files.
    ours = from_audio_folder(folder, sampling_rate=RATE, shuffle=False, verbose=False)
    theirs = keras.utils.audio_dataset_from_directory(folder, shuffle=False, verbose=False)
    assert _all(ours) == _all(theirs)


@pytest.fixture(scope="module")
def folder_16k(tmp_path_factory):
    """16 kHz stereo tones of different lengths, 2 classes (shuffle=False: sorted order)."""
    root = tmp_path_factory.mktemp("speech16k")
    for c, lengths in (("hi", (3000, 17, 1200)), ("lo", (801, 5000))):
        for i, n in enumerate(lengths):
            t = np.arange(n) / 16000
            x = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.3 * np.sin(2 * np.pi * 3000 * t)],
                         axis=1).astype(np.float32)
            _write(root / c / f"{i}.wav", tf.audio.encode_wav(x, 16000).numpy())
    return root


def _resampled_by_scipy(root, up: int, down: int) -> list:
    """Each file of `root` (sorted) decoded by TensorFlow, resampled by resample_poly."""
    import scipy.signal

    files = sorted(root.glob("*/*.wav"))
    return [scipy.signal.resample_poly(
        tf.audio.decode_wav(tf.io.read_file(str(f)))[0].numpy().astype(np.float64), up,
        down, axis=0) for f in files]


@pytest.mark.parametrize("rate, up, down", [(8000, 1, 2), (22050, 441, 320)])
def test_sampling_rate_resamples_every_file_as_resample_poly(folder_16k, rate, up, down):
    ds = from_audio_folder(folder_16k, sampling_rate=rate, batch_size=None, shuffle=False,
                           verbose=False)
    assert ds.sample_rate == rate and ds.channels == 2
    expected = _resampled_by_scipy(folder_16k, up, down)
    got = [x.numpy() for x, _ in ds]
    assert [len(x) for x in got] == [-(-n * up // down) for n in (3000, 17, 1200, 801, 5000)]
    for ours, theirs in zip(got, expected):  # float32 rounding (tests/test_resample.py)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6)


def test_output_sequence_length_counts_samples_at_the_new_rate(folder_16k):
    ds = from_audio_folder(folder_16k, sampling_rate=8000, output_sequence_length=700,
                           batch_size=5, shuffle=False, verbose=False)
    assert ds.element_spec[0].shape.as_list() == [None, 700, None]
    (x, y), = list(ds)
    assert x.shape == (5, 700, 2) and y.numpy().tolist() == [0, 0, 0, 1, 1]
    # Each file resampled whole, then cut or zero-padded: only the samples that decide the
    # first 700 are read, and they give the same values.
    for ours, theirs in zip(x.numpy(), _resampled_by_scipy(folder_16k, 1, 2)):
        padded = np.pad(theirs, [[0, max(0, 700 - len(theirs))], [0, 0]])[:700]
        np.testing.assert_allclose(ours, padded, rtol=0, atol=2e-6)


def test_resampled_batches_padded_or_ragged(folder_16k):
    lengths = [1500, 9, 600, 401, 2500]  # ceil(n / 2) of each file, sorted order
    padded = from_audio_folder(folder_16k, sampling_rate=8000, batch_size=2, shuffle=False,
                               verbose=False)
    assert [x.shape[1] for x, _ in padded] == [1500, 600, 2500]  # each batch its longest
    ragged = from_audio_folder(folder_16k, sampling_rate=8000, batch_size=5, ragged=True,
                               shuffle=False, verbose=False)
    (x, _), = list(ragged)
    assert isinstance(x, tf.RaggedTensor) and x.row_lengths().numpy().tolist() == lengths


def test_upsampling_a_folder(folder):
    ds = from_audio_folder(folder, sampling_rate=2 * RATE, batch_size=None, shuffle=False,
                           verbose=False)
    plain = from_audio_folder(folder, batch_size=None, shuffle=False, verbose=False)
    assert [len(x) for x, _ in ds] == [2 * len(x) for x, _ in plain]
    assert ds.sample_rate == 2 * RATE


def test_a_file_cache_of_other_rates_is_rebuilt_not_reused(folder_16k, tmp_path):
    cache = str(tmp_path / "cache" / "audio")
    kwargs = dict(batch_size=None, shuffle=False, verbose=False, cache=cache)
    assert [len(x) for x, _ in from_audio_folder(folder_16k, sampling_rate=8000, **kwargs)] \
        == [1500, 9, 600, 401, 2500]
    assert [len(x) for x, _ in from_audio_folder(folder_16k, **kwargs)] \
        == [3000, 17, 1200, 801, 5000]
    assert [len(x) for x, _ in from_audio_folder(folder_16k, sampling_rate=11025,
                                                 **kwargs)] == [2068, 12, 827, 552, 3446]


def test_sampling_rate_without_the_header_check_is_refused():
    with pytest.raises(UserInputError) as caught:
        from_audio_folder("anywhere", sampling_rate=8000, verify=False, verbose=False)
    assert str(caught.value) == (
        "sampling_rate=8000 needs verify=True: tfaccel resamples from the rate the header "
        "check reads (verify=False reads no header); pass verify=True or "
        "sampling_rate=None.")


@pytest.mark.parametrize("kwargs, message", [
    ({"sampling_rate": 0}, "`sampling_rate` should be higher than 0. Received: sampling_rate=0"),
    ({"sampling_rate": 8000.0}, "`sampling_rate` should have an integer value"),
    ({"sampling_rate": True}, "`sampling_rate` should have an integer value"),
    ({"ragged": True, "output_sequence_length": 5}, "Cannot set both `ragged` and"),
    ({"output_sequence_length": 0}, "output_sequence_length must be a positive integer"),
    ({"validation_split": 0.2, "subset": "training"}, "must provide a `seed`"),
    ({"label_mode": "binary"}, "there must be exactly 2"),
])
def test_bad_arguments_keras_wording(folder, kwargs, message):
    with pytest.raises(UserInputError, match=message.replace("(", r"\(")):
        from_audio_folder(folder, verbose=False, **kwargs)


def test_mixed_sample_rates_are_refused_naming_a_file_of_each(tmp_path):
    _write(tmp_path / "a" / "0.wav", _wav(9, rate=16000))
    _write(tmp_path / "a" / "1.wav", _wav(9, rate=16000))
    _write(tmp_path / "b" / "0.wav", _wav(9, rate=8000))
    with pytest.raises(DataError, match=r"mixed sample rates: 2 file\(s\) at 16000 Hz, e\.g\. "
                                        r".*a/0\.wav', 1 file\(s\) at 8000 Hz, e\.g\. "
                                        r".*b/0\.wav'.*resamples one rate to `sampling_rate`"):
        from_audio_folder(tmp_path, verbose=False)


def test_mixed_channel_counts_are_refused_naming_a_file_of_each(tmp_path):
    _write(tmp_path / "a" / "0.wav", _wav(9, channels=1))
    _write(tmp_path / "b" / "0.wav", _wav(9, channels=2))
    with pytest.raises(DataError, match=r"mixed channelss?: 1 file\(s\) at 1 channel\(s\), "
                                        r"e\.g\. .*a/0\.wav', 1 file\(s\) at 2 channel"):
        from_audio_folder(tmp_path, verbose=False)


@pytest.mark.parametrize("layout, message", [
    ({}, r"has no class sub-folders"),
    ({"a/": None, "b/": None}, r"No audio files found in directory .* no usable 16-bit PCM"),
    ({"a/0.wav": "ok", "b/notes.txt": b"x"},
     r"Class sub-folder\(s\) \['.*/b'\] of directory .* hold no usable 16-bit PCM \.wav"),
    ({"a/0.wav": "ok", "b/0.wav": b"RIFF junk"},
     r"Class sub-folder\(s\) \['.*/b'\] of directory"),
])
def test_bad_folders_are_named(tmp_path, layout, message):
    for name, content in layout.items():
        if content is None:
            (tmp_path / name).mkdir(parents=True)
        else:
            _write(tmp_path / name, _wav(5) if content == "ok" else content)
    with pytest.raises(DataError, match=message):
        from_audio_folder(tmp_path, verbose=False)


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(DataError, match=r"Directory path .*nowhere' does not exist"):
        from_audio_folder(tmp_path / "nowhere")


def test_unreadable_wavs_are_skipped_with_one_warning_and_reasons(folder, tmp_path, caplog):
    root = tmp_path / "bad"
    for c in ("a", "b"):
        for i in range(3):
            _write(root / c / f"{i}.wav", _wav(10 + i, seed=i))
    good = _wav(40)
    _write(root / "a" / "cut.wav", good[:-7])  # samples missing
    _write(root / "b" / "text.wav", b"not a wav at all")
    with open(root / "b" / "0.wav", "rb") as f:  # the same file as 24-bit PCM
        header = bytearray(f.read(44))
    header[34:36] = struct.pack("<H", 24)
    _write(root / "b" / "deep.wav", bytes(header) + b"\x00" * 30)
    _write(root / "a" / "readme.txt", b"hello")
    with caplog.at_level(logging.WARNING, logger="tfaccel.data.sources.audio_folder"):
        ds = from_audio_folder(root, shuffle=False, verbose=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Skipped 4 file(s) in {root}: 3 that tf.audio.decode_wav "
                                  "cannot read")
    assert "cut.wav (cut short (fewer samples than its data chunk says))" in warnings[0]
    assert "text.wav (not a RIFF/WAVE file)" in warnings[0]
    assert "deep.wav (24-bit samples" in warnings[0]
    assert "1 without a .wav ending" in warnings[0] and "readme.txt" in warnings[0]
    assert [p.name for p in map(__import__("pathlib").Path, ds.file_paths)] == \
        ["0.wav", "1.wav", "2.wav"] * 2
    assert sum(int(x.shape[0]) for x, _ in ds) == 6  # every usable file, once


def _riff(*chunks: bytes) -> bytes:
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _chunk(name: bytes, data: bytes) -> bytes:
    return name + struct.pack("<I", len(data)) + data


def _fmt(channels=2, rate=RATE, bits=16, audio_format=1, extra=b""):
    align = channels * bits // 8
    return _chunk(b"fmt ", struct.pack("<HHIIHH", audio_format, channels, rate,
                                       rate * align, align, bits) + extra)


SAMPLES = struct.pack("<12h", *range(-6, 6))  # 6 stereo frames


@pytest.mark.parametrize("name, data", [
    ("encode_wav", _wav(7)),
    ("JUNK before fmt", _riff(_chunk(b"JUNK", b"1234"), _fmt(), _chunk(b"data", SAMPLES))),
    ("LIST before fmt", _riff(_chunk(b"LIST", b"1234"), _fmt(), _chunk(b"data", SAMPLES))),
    ("LIST after fmt", _riff(_fmt(), _chunk(b"LIST", b"1234"), _chunk(b"data", SAMPLES))),
    ("odd chunk, padded", _riff(_fmt(), _chunk(b"LIST", b"123") + b"\x00",
                                _chunk(b"data", SAMPLES))),
    ("18-byte fmt", _riff(_fmt(extra=b"\x00\x00"), _chunk(b"data", SAMPLES))),
    ("fmt of 20", _riff(_fmt(extra=b"\x00" * 4), _chunk(b"data", SAMPLES))),
    ("24-bit", _riff(_fmt(bits=24), _chunk(b"data", SAMPLES))),
    ("8-bit", _riff(_fmt(bits=8), _chunk(b"data", SAMPLES))),
    ("float", _riff(_fmt(audio_format=3), _chunk(b"data", SAMPLES))),
    ("no data", _riff(_fmt())),
    ("two data", _riff(_fmt(), _chunk(b"data", SAMPLES), _chunk(b"data", SAMPLES))),
    ("empty data", _riff(_fmt(), _chunk(b"data", b""))),
    ("half frame", _riff(_fmt(), _chunk(b"data", SAMPLES[:-2]))),
    ("cut short", _riff(_fmt(), _chunk(b"data", SAMPLES))[:-3]),
    ("trailing chunk", _riff(_fmt(), _chunk(b"data", SAMPLES), _chunk(b"LIST", b"ab"))),
    ("3 trailing bytes", _riff(_fmt(), _chunk(b"data", SAMPLES)) + b"abc"),
    ("8 trailing bytes", _riff(_fmt(), _chunk(b"data", SAMPLES)) + b"abcdefgh"),
    ("header only", _wav(7)[:20]),
    ("full range", _riff(_fmt(channels=1), _chunk(b"data", struct.pack(
        "<6h", -32768, -1, 0, 1, 32767, 12345)))),
    ("empty file", b""),
])
def test_header_check_agrees_with_decode_wav(tmp_path, name, data):
    path = tmp_path / "x.wav"
    path.write_bytes(data)
    header, reason = read_wav_header(str(path))
    try:
        audio, rate = tf.audio.decode_wav(data)
    except tf.errors.InvalidArgumentError:
        assert header is None and reason, name  # refused by both
        return
    assert header[:3] == (int(audio.shape[1]), int(rate), int(audio.shape[0])), name
    # The pipeline reads the samples where the header says, with decode_wav's values.
    source = {"path": tf.constant(str(path)), "offset": tf.constant(header.data_offset, tf.int64),
              "frames": tf.constant(header.frames, tf.int64),
              "channels": tf.constant(header.channels, tf.int64)}
    for length in (None, 3, 50):
        expected, _ = tf.audio.decode_wav(data, desired_samples=length or -1)
        ours = _decoder(output_sequence_length=length, ragged=False, headers_known=True)(source)
        assert ours.shape == expected.shape, (name, length)
        # Bit for bit (as integers: equal floats, zeros' signs included).
        assert np.array_equal(ours.numpy().view(np.int32), expected.numpy().view(np.int32))


def test_caches_hold_keras_order_epoch_after_epoch(folder, tmp_path):
    # The cache holds Keras' permuted listing decoded; Keras' buffer and seed shuffle it
    # after the cache, so every epoch is Keras' epoch (the paths it shuffles are in the
    # same order as the cached waveforms).
    kwargs = dict(batch_size=4, seed=2, verbose=False)
    keras_ds = keras.utils.audio_dataset_from_directory(folder, **kwargs)
    theirs = [_all(keras_ds), _all(keras_ds)]
    cached = from_audio_folder(folder, cache=str(tmp_path / "cache" / "audio"), **kwargs)
    assert [_all(cached), _all(cached)] == theirs
    reused = from_audio_folder(folder, cache=str(tmp_path / "cache" / "audio"), **kwargs)
    assert _all(reused) == theirs[0]  # read from the files written above
    keras_ragged = keras.utils.audio_dataset_from_directory(folder, ragged=True, **kwargs)
    ragged = from_audio_folder(folder, cache="memory", ragged=True, **kwargs)
    assert [_all(ragged), _all(ragged)] == [_all(keras_ragged), _all(keras_ragged)]
    assert isinstance(next(iter(ragged))[0], tf.RaggedTensor)


def test_input_contexts_share_the_files_and_a_stream_resumes(folder):
    kwargs = dict(batch_size=6, seed=3, verbose=False, output_sequence_length=64)
    seen = []
    for pipeline_id in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                         num_replicas_in_sync=2)
        for x, _ in from_audio_folder(folder, input_context=ctx, **kwargs):
            seen += [tuple(np.asarray(w).ravel()[:8]) for w in x.numpy()]
    everything = [tuple(np.asarray(w).ravel()[:8])
                  for x, _ in from_audio_folder(folder, **kwargs) for w in x.numpy()]
    assert sorted(seen) == sorted(everything) and len(seen) == 18
    full = _all(from_audio_folder(folder, **kwargs, stream=EpochStream(num_passes=1)))
    resumed = _all(from_audio_folder(folder, **kwargs,
                                     stream=EpochStream(skip_batches=2, num_passes=1)))
    assert resumed == full[2:]


def test_given_labels_and_no_labels(folder):
    listing = from_audio_folder(folder, labels=None, shuffle=False, verbose=False)
    n = len(listing.file_paths)
    labels = [i % 2 for i in range(n)]
    ours = from_audio_folder(folder, labels=labels, shuffle=False, verbose=False)
    theirs = keras.utils.audio_dataset_from_directory(folder, labels=labels, shuffle=False,
                                                      verbose=False)
    assert _all(ours) == _all(theirs) and ours.class_names == ["0", "1"]
    assert listing.class_names is None
    assert isinstance(next(iter(listing)), tf.Tensor)


def test_without_the_check_decode_wav_reads_and_a_bad_file_is_skipped(folder, tmp_path):
    ours = from_audio_folder(folder, verify=False, seed=6, output_sequence_length=30,
                             verbose=False)
    theirs = keras.utils.audio_dataset_from_directory(folder, seed=6,
                                                      output_sequence_length=30, verbose=False)
    assert ours.sample_rate is None and _all(ours) == _all(theirs)
    _write(tmp_path / "a" / "0.wav", _wav(9))
    _write(tmp_path / "a" / "1.wav", _wav(9)[:-4])  # cut short: decode_wav fails on it
    ds = from_audio_folder(tmp_path, verify=False, shuffle=False, verbose=False)
    assert len(ds.file_paths) == 2 and sum(int(x.shape[0]) for x, _ in ds) == 1


def test_optimize_padded_batch_pads_each_batch_to_its_longest_example():
    from tfaccel.data import optimize

    lengths = [3, 1, 2, 5, 4]
    examples = tf.data.Dataset.from_tensor_slices(tf.constant(lengths)).map(
        lambda n: tf.ones([n, 1]))  # [None, 1]: a length unknown to the spec
    padded = [b.numpy() for b in optimize(examples, batch_size=2, padded_batch=True)]
    assert [b.shape for b in padded] == [(2, 3, 1), (2, 5, 1), (1, 4, 1)]
    assert padded[0][:, :, 0].tolist() == [[1, 1, 1], [1, 0, 0]]  # zeros after the end
    ragged = next(iter(optimize(examples, batch_size=2)))  # the default: ragged batches
    assert isinstance(ragged, tf.RaggedTensor)

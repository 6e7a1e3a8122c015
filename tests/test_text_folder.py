"""from_text_folder beside keras.utils.text_dataset_from_directory: same files, order, output."""

import logging

import keras
import numpy as np
import pytest

from tfaccel.data import from_text_folder
from tfaccel.errors import DataError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

CLASSES = ("neg", "neutral", "pos")


def _write(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("reviews")
    rng = np.random.default_rng(0)
    for c in CLASSES:
        for i in range(5 + 2 * CLASSES.index(c)):  # 5, 7, 9 texts: unequal classes
            words = " ".join(f"{c}{int(w)}" for w in rng.integers(0, 50, 3 + i))
            sub = "nested" if i % 4 == 3 else ""  # a few in a sub-folder of the class
            _write(root / c / sub / f"{i:02d}.txt", f"{words} café ünï".encode())
    _write(root / "pos" / "notes.md", b"not a .txt file")
    return root


def _all(ds, labelled=True):
    """Every (text, label) pair of a dataset, in order."""
    if not labelled:
        return [t for batch in ds for t in np.atleast_1d(batch.numpy()).tolist()]
    out = []
    for x, y in ds:
        if x.shape.rank == 0:  # batch_size=None: single examples
            x, y = x[None], y[None]
        out += list(zip(x.numpy().tolist(), y.numpy().tolist()))
    return out


@pytest.mark.parametrize("kwargs", [
    {"shuffle": False},
    {"shuffle": False, "label_mode": "categorical", "max_length": 7},
    {"shuffle": False, "label_mode": "binary", "class_names": ["pos", "neg"]},
    {"seed": 3},  # shuffled: Keras' permutation and Keras' buffer and seed
    {"seed": 5, "batch_size": None, "max_length": 4},
    {"seed": 1, "batch_size": 4, "validation_split": 0.25, "subset": "training"},
    {"seed": 1, "batch_size": 4, "validation_split": 0.25, "subset": "validation"},
])
def test_same_texts_labels_and_order_as_keras(folder, kwargs):
    kwargs = {"batch_size": 5, **kwargs}
    theirs = keras.utils.text_dataset_from_directory(folder, verbose=False, **kwargs)
    ours = from_text_folder(folder, verbose=False, **kwargs)
    assert ours.element_spec == theirs.element_spec
    assert ours.class_names == theirs.class_names
    assert _all(ours) == _all(theirs)  # element by element, in Keras' order
    assert len(_all(ours)) == len(ours.file_paths)


def test_subset_both_is_keras_pair(folder):
    kwargs = dict(batch_size=3, validation_split=0.3, subset="both", seed=7)
    ours = from_text_folder(folder, verbose=False, **kwargs)
    theirs = keras.utils.text_dataset_from_directory(folder, verbose=False, **kwargs)
    for a, b in zip(ours, theirs):
        assert _all(a) == _all(b)
    assert len(ours[0].file_paths) == 15 and len(ours[1].file_paths) == 6
    assert not set(ours[0].file_paths) & set(ours[1].file_paths)


def test_texts_only_and_given_labels(folder):
    kwargs = dict(batch_size=4, shuffle=False, verbose=False)
    ours = from_text_folder(folder, label_mode=None, **kwargs)
    theirs = keras.utils.text_dataset_from_directory(folder, label_mode=None, **kwargs)
    assert ours.element_spec == theirs.element_spec and ours.class_names is None
    assert _all(ours, labelled=False) == _all(theirs, labelled=False)
    given = [i % 2 for i in range(21)]
    ours = from_text_folder(folder, labels=given, **kwargs)
    theirs = keras.utils.text_dataset_from_directory(folder, labels=given, **kwargs)
    assert ours.class_names == theirs.class_names == ["0", "1"]
    assert _all(ours) == _all(theirs)


def test_verbose_prints_keras_line(folder, capsys):
    from_text_folder(folder, shuffle=False)
    assert "Found 21 files belonging to 3 classes." in capsys.readouterr().out


def test_undecodable_files_are_skipped_and_named_in_one_warning(tmp_path, caplog):
    for c in ("a", "b"):
        for i in range(3):
            _write(tmp_path / c / f"{i}.txt", f"{c} text {i}".encode())
    _write(tmp_path / "a" / "latin.txt", "caf\xe9 cr\xe8me".encode("latin-1"))
    _write(tmp_path / "b" / "utf16.txt", "hello".encode("utf-16"))
    with caplog.at_level(logging.WARNING):
        ds = from_text_folder(tmp_path, shuffle=False, verbose=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "2 not UTF-8 text" in warnings[0] and "encoding=" in warnings[0]
    assert str(tmp_path / "a" / "latin.txt") in warnings[0]
    assert str(tmp_path / "b" / "utf16.txt") in warnings[0]
    texts = [t for t, _ in _all(ds)]
    assert len(texts) == 6 and sorted(ds.skipped_files) == sorted(
        [str(tmp_path / "a" / "latin.txt"), str(tmp_path / "b" / "utf16.txt")])
    # Labels stay with their files when one is left out.
    assert _all(ds) == [(f"{c} text {i}".encode(), "ab".index(c)) for c in "ab"
                        for i in range(3)]


def test_encoding_transcodes_to_utf8(tmp_path):
    _write(tmp_path / "fr" / "0.txt", "caf\xe9 cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    _write(tmp_path / "de" / "0.txt", "Gr\xfc\xdfe".encode("latin-1"))
    ds = from_text_folder(tmp_path, encoding="latin-1", shuffle=False, verbose=False)
    assert _all(ds) == [("Grüße".encode(), 0), ("café crème brûlée".encode(), 1)]
    # max_length cuts the UTF-8 text in bytes, as Keras cuts.
    ds = from_text_folder(tmp_path, encoding="cp1252", shuffle=False, verbose=False,
                          max_length=4)
    assert _all(ds) == [("Grü".encode(), 0), ("caf\xc3".encode("latin-1"), 1)]


@pytest.mark.parametrize("kwargs, message", [
    ({"subset": "training"}, r"`validation_split` must be set; got subset='training' and "
                             r"validation_split=None\.$"),
    ({"max_length": -1}, "max_length must be an integer >= 0 or None, got max_length=-1"),
    ({"validation_split": 0.2, "subset": "training"}, "must provide a `seed`"),
    ({"labels": "folders"}, "`labels` argument should be .* got labels='folders'"),
])
def test_bad_arguments_are_named(folder, kwargs, message):
    with pytest.raises(UserInputError, match=message):
        from_text_folder(folder, verbose=False, **kwargs)


def test_bad_encoding_is_named(folder):
    with pytest.raises(UserInputError, match="encoding=.no-such-codec."):
        from_text_folder(folder, encoding="no-such-codec")


@pytest.mark.parametrize("make, message", [
    (lambda root: None, "does not exist"),
    (lambda root: root.mkdir(), "has no class sub-folders"),
    (lambda root: [(root / "a").mkdir(parents=True), (root / "b").mkdir()],
     "No text files found in text folder"),
    (lambda root: [_write(root / "a" / "0.txt", b"x"), (root / "b").mkdir(),
                   _write(root / "b" / "skip.md", b"y")],
     r"Class sub-folder\(s\) \['.*/b'\] of text folder .* hold no usable .txt file"),
    (lambda root: [_write(root / "a" / "0.txt", b"x"), _write(root / "b" / "1.txt", b"\xff")],
     r"Class sub-folder\(s\) \['.*/b'\] .* no usable .txt file \(UTF-8 text\)"),
])
def test_bad_folders_are_data_errors_naming_the_path(tmp_path, make, message):
    root = tmp_path / "texts"
    make(root)
    with pytest.raises(DataError, match=message) as raised:
        from_text_folder(root, verbose=False)
    assert str(root) in str(raised.value)


def test_file_cache_is_rebuilt_when_max_length_changes(folder, tmp_path):
    common = dict(seed=0, verbose=False, batch_size=8, cache=str(tmp_path / "c"))
    first = _all(from_text_folder(folder, max_length=6, **common))
    again = _all(from_text_folder(folder, max_length=6, **common))
    longer = _all(from_text_folder(folder, max_length=9, **common))
    assert sorted(first) == sorted(again) and len(first) == 21
    assert max(len(t) for t, _ in first) == 6 and max(len(t) for t, _ in longer) == 9


def test_input_contexts_share_the_files_and_a_stream_resumes(folder):
    import tensorflow as tf

    from tfaccel.data import EpochStream

    shares = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
        shares.append(_all(from_text_folder(folder, batch_size=1, seed=0, verbose=False,
                                            input_context=ctx)))
    whole = _all(from_text_folder(folder, batch_size=4, seed=0, verbose=False))
    assert sorted(shares[0] + shares[1]) == sorted(whole) and len(whole) == 21
    assert len(shares[0]) == 11 and len(shares[1]) == 10
    kwargs = dict(batch_size=4, seed=3, verbose=False)
    full = _all(from_text_folder(folder, **kwargs, stream=EpochStream(num_passes=1)))
    resumed = _all(from_text_folder(folder, **kwargs,
                                    stream=EpochStream(skip_batches=2, num_passes=1)))
    assert resumed == full[8:]


def test_a_stream_by_length_resumed_mid_pass_gets_exactly_the_rest(tmp_path):
    # The library twin of the recipe test (test_from_recipe): from_text_folder's texts
    # batched by length, deterministic=False, a stream resumed at (pass 1, batch 11) must
    # give the uninterrupted pass's remaining batches, every text once a pass.
    from tfaccel.data import EpochStream

    for c, name in enumerate(["neg", "pos"]):
        for i in range(60):
            words = [f"t{c}x{i}"] + ["the", "a", name] * 10  # lengths tie: 3, 4 or 30 words
            _write(tmp_path / name / f"{i:02d}.txt", " ".join(words[:(3, 4, 30)[i % 3]]).encode())

    def first_words(first_pass=0, skip=0):
        texts = from_text_folder(tmp_path, batch_size=4, seed=1, deterministic=False,
                                 batch_by_length=True, verbose=False,
                                 stream=EpochStream(first_pass=first_pass, skip_batches=skip,
                                                    num_passes=2))
        return [tuple(t.split()[0].decode() for t in x.numpy()) for x, _ in texts]

    whole = first_words()
    assert len(whole) == 60  # 2 passes of 30 batches
    for p in range(2):
        seen = sorted(t for batch in whole[30 * p:30 * (p + 1)] for t in batch)
        assert seen == sorted(f"t{c}x{i}" for c in range(2) for i in range(60))
    assert first_words(first_pass=1, skip=11) == whole[41:]

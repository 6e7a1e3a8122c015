"""from_image_folder as a drop-in for keras.utils.image_dataset_from_directory, side by side."""

from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tfaccel.data import from_arrays, from_image_folder, from_tfrecords
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

CLASSES = ("cat", "dog", "bird")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("pets")
    rng = np.random.default_rng(0)
    for c in CLASSES:
        (root / c).mkdir()
        for i in range(4 + CLASSES.index(c)):  # 4, 5, 6 images: unequal classes
            pixels = rng.integers(0, 255, (20 + 3 * i, 30, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / c / f"{i}.png")
    return str(root)


def _labels_by_path(ds):
    labels = np.concatenate([y.numpy() for _, y in ds])
    return dict(zip(ds.file_paths, labels.tolist()))


@pytest.mark.parametrize("kwargs", [
    {},
    {"label_mode": "categorical"},
    {"label_mode": "binary", "class_names": ["dog", "cat"]},
    {"class_names": ["dog", "bird", "cat"], "interpolation": "nearest",
     "crop_to_aspect_ratio": True},
    {"color_mode": "grayscale", "label_mode": "categorical"},
])
def test_same_spec_class_names_and_labels_as_keras(folder, kwargs):
    common = dict(image_size=(8, 8), batch_size=4, shuffle=False, **kwargs)
    theirs = keras.utils.image_dataset_from_directory(folder, verbose=False, **common)
    ours = from_image_folder(folder, **common)
    assert ours.element_spec == theirs.element_spec
    assert ours.class_names == theirs.class_names
    assert ours.file_paths == theirs.file_paths
    ours_labels, theirs_labels = _labels_by_path(ours), _labels_by_path(theirs)
    assert ours_labels == theirs_labels


def test_keras_call_shapes_work_unchanged(folder):
    # Keras' positional (directory, labels) and its keyword directory= (issue #28: the
    # same call as Keras); a list of labels in Keras' listing order.
    listing = keras.utils.image_dataset_from_directory(folder, verbose=False, shuffle=False)
    labels = [int(y) for _, ys in listing for y in ys.numpy()]
    labels = [(label + 1) % 3 for label in labels]
    common = dict(image_size=(8, 8), batch_size=4, shuffle=False, verbose=False)
    for call in (lambda f: f(folder, labels, **common),
                 lambda f: f(directory=folder, labels=labels, **common)):
        theirs, ours = call(keras.utils.image_dataset_from_directory), call(from_image_folder)
        assert ours.file_paths == theirs.file_paths
        assert _labels_by_path(ours) == _labels_by_path(theirs)
        assert sorted(set(_labels_by_path(ours).values())) == [0, 1, 2]


def test_label_mode_none_yields_images_only_like_keras(folder):
    theirs = keras.utils.image_dataset_from_directory(folder, label_mode=None, verbose=False,
                                                      image_size=(8, 8), shuffle=False)
    ours = from_image_folder(folder, label_mode=None, image_size=(8, 8), batch_size=32,
                             shuffle=False)
    assert ours.element_spec == theirs.element_spec and ours.class_names is None
    assert sum(int(x.shape[0]) for x in ours) == 15


def test_pixels_match_keras_within_rounding(folder):
    # Same decode and resize; tfaccel rounds to uint8 only when it caches or shuffles.
    # Unshuffled, examples come in file_paths order (parallel decode, fixed order), so a
    # prediction can be matched to its file as with Keras.
    for kwargs in ({}, {"crop_to_aspect_ratio": True, "interpolation": "bicubic"}):
        theirs = keras.utils.image_dataset_from_directory(
            folder, image_size=(8, 8), shuffle=False, verbose=False, **kwargs)
        ours = from_image_folder(folder, image_size=(8, 8), batch_size=32, shuffle=False,
                                 **kwargs)
        a = np.concatenate([x.numpy() for x, _ in ours])
        b = np.concatenate([x.numpy() for x, _ in theirs])
        np.testing.assert_allclose(a, b, atol=1e-3)


def test_subset_both_and_validation_split_alias(folder):
    train, val = from_image_folder(folder, image_size=(8, 8), batch_size=4,
                                   validation_split=0.2, subset="both", seed=3)
    k_train, k_val = keras.utils.image_dataset_from_directory(
        folder, image_size=(8, 8), batch_size=4, validation_split=0.2, subset="both",
        seed=3, verbose=False)
    assert (len(train.file_paths), len(val.file_paths)) == (len(k_train.file_paths),
                                                             len(k_val.file_paths)) == (12, 3)
    assert not set(train.file_paths) & set(val.file_paths)
    assert train.class_names == val.class_names == k_train.class_names
    assert sum(int(y.shape[0]) for _, y in val) == 3
    # Keras' own files, in Keras' order (they were only the same counts before).
    assert train.file_paths == k_train.file_paths and val.file_paths == k_val.file_paths


@pytest.mark.parametrize("seed", [0, 3, 11])
@pytest.mark.parametrize("subset", ["training", "validation"])
def test_validation_split_holds_out_keras_files_one_subset_at_a_time(folder, subset, seed):
    kwargs = dict(image_size=(8, 8), batch_size=4, validation_split=0.25, subset=subset,
                  seed=seed)
    ours = from_image_folder(folder, **kwargs)
    theirs = keras.utils.image_dataset_from_directory(folder, verbose=False, **kwargs)
    assert ours.file_paths == theirs.file_paths
    # Both shuffle what they deliver: the same labels, in another order.
    assert sorted(np.concatenate([y.numpy() for _, y in ours]).tolist()) == sorted(
        np.concatenate([y.numpy() for _, y in theirs]).tolist())


def test_validation_split_with_a_corrupt_file_still_holds_out_keras_files(folder, tmp_path):
    # Keras lists the corrupt file and fails on it while decoding; tfaccel lists it too, so
    # the permutation and the split are Keras', and leaves it out of its subset.
    import shutil

    copy = tmp_path / "pets"
    shutil.copytree(folder, copy)
    (copy / "dog" / "zz_broken.png").write_bytes(b"not a png")
    kwargs = dict(image_size=(8, 8), batch_size=4, validation_split=0.25, seed=5)
    for subset in ("training", "validation"):
        ours = from_image_folder(copy, subset=subset, **kwargs)
        theirs = keras.utils.image_dataset_from_directory(copy, subset=subset, verbose=False,
                                                          **kwargs)
        assert ours.file_paths == [p for p in theirs.file_paths if "zz_broken" not in p]


def test_validation_split_with_shuffling_needs_a_seed_like_keras(folder):
    with pytest.raises(UserInputError, match=r"needs a seed \(got seed=None\)"):
        from_image_folder(folder, image_size=(8, 8), batch_size=4, validation_split=0.2,
                          subset="training")


@pytest.mark.parametrize("kwargs, message", [
    # Keras' wording (its own tests match it), with the argument and the value received.
    ({"label_mode": "binary"}, r"there must be exactly 2 classes; .* has 3: class_names="
                               r"\['bird', 'cat', 'dog'\]"),
    ({"label_mode": "sparse"}, "`label_mode` argument must be one of .* got "
                               "label_mode='sparse'"),
    ({"class_names": ["cat", "cow"]}, r"`class_names` passed did not match .* got "
                                      r"class_names=\['cat', 'cow'\], and \['cow'\]"),
    ({"interpolation": "cubic"}, "interpolation must be one of .* got 'cubic'"),
    ({"color_mode": "cmyk"}, "`color_mode` must be one of .* got color_mode='cmyk'"),
    ({"subset": "both"}, "If `subset` is set, `validation_split` .* got subset='both'"),
    ({"labels": [0, 1]}, r"lengths of `labels` to match the number of files .* len\(labels\) "
                         r"is 2 while 15 image files were found"),
    ({"labels": "folders"}, "`labels` argument should be .* got labels='folders'"),
    ({"labels": [0] * 15, "class_names": ["cat"]},
     r'only pass `class_names` if `labels="inferred"` .* got labels=\[0, 0, 0, 0, 0, 0, '
     r"\.\.\.\] and class_names=\['cat'\]"),
    ({"validation_split": 0.2, "subset": "training"},
     r"needs a seed \(got seed=None\): you must provide a `seed` argument"),
    ({"validation_split": 0.2}, "and inversely; got subset=None and validation_split=0.2"),
    ({"validation_split": 1.5, "subset": "training", "seed": 1},
     "`validation_split` must be between 0 and 1, got validation_split=1.5"),
    ({"subset": "train", "validation_split": 0.2, "seed": 1},
     '`subset` must be either "training", "validation" or "both" .* got subset=\'train\''),
    ({"crop_to_aspect_ratio": True, "pad_to_aspect_ratio": True},
     "Only one of `pad_to_aspect_ratio`, `crop_to_aspect_ratio` .* got "
     "pad_to_aspect_ratio=True and crop_to_aspect_ratio=True"),
    ({"image_size": (8, 8, 3)}, r"image_size must be \(height, width\) or one int .* got "
                                r"image_size=\(8, 8, 3\)"),
])
def test_bad_keras_arguments_are_named(folder, kwargs, message):
    with pytest.raises(UserInputError, match=message):
        from_image_folder(folder, **{"image_size": (8, 8), "batch_size": 4, **kwargs})
    # Keras raises ValueError; so does tfaccel (UserInputError is one), so `except
    # ValueError` written for Keras still catches it.
    assert issubclass(UserInputError, ValueError)


def test_defaults_and_int_image_size_are_keras_defaults(folder):
    theirs = keras.utils.image_dataset_from_directory(folder, shuffle=False, verbose=False)
    ours = from_image_folder(folder, shuffle=False)
    assert ours.element_spec == theirs.element_spec
    assert ours.element_spec[0].shape.as_list() == [None, 256, 256, 3]
    assert [int(y.shape[0]) for _, y in ours] == [15]  # batch_size 32
    square = from_image_folder(folder, image_size=6, batch_size=4, shuffle=False)
    assert square.element_spec[0].shape.as_list() == [None, 6, 6, 3]


def test_labels_list_is_in_sorted_file_order_like_keras(folder):
    given = [i % 3 for i in range(15)]
    common = dict(image_size=(8, 8), batch_size=4, shuffle=False, labels=given)
    theirs = keras.utils.image_dataset_from_directory(folder, verbose=False, **common)
    ours = from_image_folder(folder, **common)
    assert ours.class_names == theirs.class_names == ["0", "1", "2"]
    assert ours.file_paths == theirs.file_paths
    assert _labels_by_path(ours) == _labels_by_path(theirs)
    assert [v for _, v in sorted(_labels_by_path(ours).items())] == given


def test_labels_list_stays_aligned_when_a_corrupt_file_is_skipped(folder, tmp_path):
    root = tmp_path / "pets"
    for c in CLASSES:
        (root / c).mkdir(parents=True)
        for p in sorted((Path(folder) / c).iterdir()):
            (root / c / p.name).write_bytes(p.read_bytes())
    (root / "cat" / "1.png").write_bytes(b"not a png")  # bird/0-5, cat/0-3: the 8th
    ds = from_image_folder(root, image_size=(8, 8), batch_size=4, shuffle=False,
                           labels=list(range(15)))
    assert ds.skipped_files == [str(root / "cat" / "1.png")]
    by_path = _labels_by_path(ds)
    assert by_path[str(root / "cat" / "0.png")] == 6 and by_path[str(root / "cat" / "2.png")] == 8
    assert sorted(by_path.values()) == [v for v in range(15) if v != 7]


def test_labels_none_lists_every_image_below_the_folder_like_keras(folder, tmp_path):
    root = tmp_path / "pets"
    (root / "cat").mkdir(parents=True)
    for name in ("0.png", "1.png"):
        (root / "cat" / name).write_bytes((Path(folder) / "cat" / name).read_bytes())
    (root / "loose.png").write_bytes((Path(folder) / "dog" / "0.png").read_bytes())
    for kwargs in ({"labels": None}, {"label_mode": None}):
        common = dict(image_size=(8, 8), batch_size=4, shuffle=False, **kwargs)
        theirs = keras.utils.image_dataset_from_directory(root, verbose=False, **common)
        ours = from_image_folder(root, **common)
        assert ours.file_paths == theirs.file_paths == [
            str(root / "loose.png"), str(root / "cat" / "0.png"), str(root / "cat" / "1.png")]
        assert ours.class_names is None and ours.element_spec == theirs.element_spec
        np.testing.assert_allclose(np.concatenate(list(ours)), np.concatenate(list(theirs)),
                                   atol=1e-3)


def test_unbatched_like_keras_and_still_cast_to_float(folder):
    for kwargs in ({"shuffle": False}, {"cache": "memory", "seed": 1}):
        theirs = keras.utils.image_dataset_from_directory(
            folder, image_size=(8, 8), batch_size=None, verbose=False, seed=1)
        ours = from_image_folder(folder, image_size=(8, 8), batch_size=None, **kwargs)
        assert ours.element_spec == theirs.element_spec
        assert ours.element_spec[0] == tf.TensorSpec((8, 8, 3), tf.float32)
        assert sum(1 for _ in ours) == 15
    with pytest.raises(UserInputError, match=r"batch_size=None \(no batches\) cannot run "
                                             r"augment=\['flip'\]"):
        from_image_folder(folder, image_size=(8, 8), batch_size=None, augment=["flip"])


def test_pad_to_aspect_ratio_matches_keras(folder):
    for interpolation in ("bilinear", "nearest"):
        common = dict(image_size=(12, 8), batch_size=32, shuffle=False,
                      pad_to_aspect_ratio=True, interpolation=interpolation)
        theirs = keras.utils.image_dataset_from_directory(folder, verbose=False, **common)
        ours = from_image_folder(folder, **common)
        assert ours.element_spec == theirs.element_spec
        a = np.concatenate([x.numpy() for x, _ in ours]).astype(np.float32)
        b = np.concatenate([x.numpy() for x, _ in theirs]).astype(np.float32)
        np.testing.assert_allclose(a, b, atol=1e-3)
        assert (a[:, 0] == 0).all()  # 20-29 x 30 images into 12 x 8: black top rows


def test_a_seed_gives_the_same_order_every_time_like_keras(folder):
    def order(**kwargs):
        ds = from_image_folder(folder, image_size=(8, 8), batch_size=4, seed=7, **kwargs)
        return np.concatenate([y.numpy() for _, y in ds]).tolist(), np.concatenate(
            [x.numpy() for x, _ in ds])

    (labels_1, pixels_1), (labels_2, pixels_2) = order(), order()
    assert labels_1 == labels_2 and np.array_equal(pixels_1, pixels_2)
    assert sorted(labels_1) == [0] * 6 + [1] * 4 + [2] * 5


def test_validation_fraction_keeps_tfaccels_default_seed(folder):
    # Keras' name asks for a seed (above); tfaccel's own name keeps "None means 0".
    train = from_image_folder(folder, image_size=(8, 8), validation_fraction=0.2,
                              subset="training")
    val = from_image_folder(folder, image_size=(8, 8), validation_fraction=0.2,
                            subset="validation")
    assert (len(train.file_paths), len(val.file_paths)) == (12, 3)
    assert not set(train.file_paths) & set(val.file_paths)


def test_an_argument_no_builder_knows_names_the_builder_and_the_argument(folder, tmp_path):
    with pytest.raises(UserInputError, match=r"from_image_folder\(\) got an unknown argument "
                                             r"'labelmode' \(did you mean 'label_mode'\?\)"):
        from_image_folder(folder, image_size=(8, 8), batch_size=4, labelmode="int")
    with pytest.raises(UserInputError, match=r"from_arrays\(\) got an unknown argument "
                                             r"'label_mode'"):
        from_arrays(np.zeros((4, 2)), np.zeros(4), batch_size=2, label_mode="int")
    with pytest.raises(UserInputError, match=r"from_tfrecords\(\) got an unknown argument "
                                             r"'shuffle_buffr' \(did you mean "
                                             r"'shuffle_buffer'\?\)"):
        from_tfrecords(str(tmp_path / "*.rec"), features={}, batch_size=2, shuffle_buffr=3)


def test_class_names_choose_and_order_the_classes(folder):
    ds = from_image_folder(folder, image_size=(8, 8), batch_size=32, shuffle=False,
                           class_names=["dog", "cat"])
    labels = _labels_by_path(ds)
    assert len(labels) == 9  # bird left out
    assert {v for p, v in labels.items() if "/dog/" in p} == {0}
    assert {v for p, v in labels.items() if "/cat/" in p} == {1}
    assert tf.reduce_max(next(iter(ds))[1]).numpy() == 1


def test_subset_both_caches_each_subset_in_its_own_files(folder, tmp_path):
    # The same rule as a recipe's splits: PREFIX and PREFIX_validation, also for a folder.
    train, val = from_image_folder(folder, image_size=(8, 8), batch_size=4,
                                   validation_split=0.2, subset="both", seed=3,
                                   cache=str(tmp_path / "c") + "/")
    assert sum(int(y.shape[0]) for _, y in train) == 12
    assert sum(int(y.shape[0]) for _, y in val) == 3
    names = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert "tfdata_cache.index" in names and "tfdata_cache_validation.index" in names

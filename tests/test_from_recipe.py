"""Tests of build_datasets: every recipe data source gives datasets and the info the runner needs."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.config.recipe import DataConfig, TextConfig
from tfaccel.data import splits
from tfaccel.data.dataset_info import DatasetInfo, TextInfo
from tfaccel.data.from_recipe import build_datasets
from tfaccel.errors import DataError


def _build(config, **kw):
    args = dict(global_batch_size=4, num_replicas=1, seed=0, deterministic=True)
    args.update(kw)
    return build_datasets(config, **args)


def _count(ds):
    return sum(int(tf.shape(y)[0]) for _, y in ds)


def test_arrays_with_validation_fraction(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=np.random.RandomState(0).rand(20, 3).astype(np.float32),
             y=np.arange(20) % 5)
    config = DataConfig(source="arrays", path=str(path), validation_fraction=0.25,
                        cache=None)
    train, val, info = _build(config)
    assert info == DatasetInfo(num_classes=5, num_outputs=5,
                               class_names=["0", "1", "2", "3", "4"], train_examples=15,
                               validation_examples=5, input_shape=(3,), steps_per_epoch=4,
                               train_examples_per_pass=15, data_service=None)
    assert _count(train) == 15 and _count(val) == 5


def test_image_folder_with_augment_and_two_replicas(tmp_path):
    for c, name in enumerate(["b", "a"]):
        (tmp_path / name).mkdir()
        for i in range(5):
            img = np.full((6, 6, 3), 50 * c + i, np.uint8)
            (tmp_path / name / f"{i}.png").write_bytes(tf.io.encode_png(img).numpy())
    config = DataConfig(source="image_folder", path=str(tmp_path), image_size=[4, 4],
                        validation_fraction=0.2, augment=["flip"], cache="memory")
    train, val, info = _build(config, num_replicas=2)
    assert info.class_names == ["a", "b"] and info.num_classes == 2
    assert info.input_shape == (4, 4, 3)
    assert info.train_examples == 8 and info.validation_examples == 2
    assert _count(train) == 8  # 2 full batches of 4, remainder dropped (none here)
    assert train.element_spec[1].shape.as_list() == [4]  # static: drop_remainder
    assert _count(val) == 2


def test_image_folder_random_resized_crop_crops_training_only(tmp_path):
    for c, name in enumerate(["b", "a"]):
        (tmp_path / name).mkdir()
        for i in range(5):
            img = np.full((24, 32, 3), 50 * c + i, np.uint8)
            (tmp_path / name / f"{i}.jpg").write_bytes(tf.io.encode_jpeg(img).numpy())
    config = DataConfig(source="image_folder", path=str(tmp_path), image_size=[8, 8],
                        validation_fraction=0.2, cache="memory",
                        augment=["random_resized_crop", "flip"])
    train, val, info = _build(config)
    assert info.train_examples == 8 and _count(train) == 8 and _count(val) == 2
    assert train.element_spec[0].shape.as_list() == [None, 8, 8, 3]
    # Validation resizes whole images (the same every epoch); training's flat-colour files
    # give the same colours whatever the crop, one per file per epoch.
    epochs = [np.concatenate([x.numpy() for x, _ in val]) for _ in range(2)]
    np.testing.assert_array_equal(epochs[0], epochs[1])
    colours = sorted(int(round(v)) for x, _ in train for v in x.numpy().mean(axis=(1, 2, 3)))
    assert len(colours) == 8 and len(set(colours)) == 8


def test_random_resized_crop_is_refused_for_other_sources():
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.errors import RecipeError

    with pytest.raises(RecipeError, match="data.augment random_resized_crop crops each image "
                       "file as it is decoded: only with data.source image_folder "
                       "\\(got 'builtin'\\)"):
        recipe_from_dict({"data": {"augment": ["random_resized_crop"]}})


def test_tfrecords_infers_classes_and_holds_out_files(tmp_path):
    def write(labels_of_files):
        for f, label in enumerate(labels_of_files):
            with tf.io.TFRecordWriter(str(tmp_path / f"p{f}.tfrecord")) as w:
                for i in range(4):
                    w.write(tf.train.Example(features=tf.train.Features(feature={
                        "image": tf.train.Feature(float_list=tf.train.FloatList(value=[i, f])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(
                            value=[label + i % 2])),
                    })).SerializeToString())

    write([0, 2, 4])  # labels 0..5, each file two of them
    config = DataConfig(source="tfrecords", path=str(tmp_path / "*.tfrecord"),
                        validation_fraction=0.34,
                        features={"image": {"dtype": "float32", "shape": [2]},
                                  "label": {"dtype": "int64"}})
    # The classes are the training files' labels (reading.labels): a label seen only in
    # the held-out file is named (it would crash (CPU) or give NaN (GPU) at validation).
    held = splits.split_indices(3, 0.34, 0)[1].tolist()
    assert held == [1]  # the file of labels 2 and 3
    with pytest.raises(DataError, match=r"\(validation split\): label 2 is not one of the "
                                        r"classes seen in the training split \(0, 1, 4, 5\)"):
        _build(config)
    write([0, 0, 4])  # every class in the training files
    train, val, info = _build(config)
    assert info.num_classes == 4 and info.class_names == ["0", "1", "4", "5"]
    assert info.train_examples == 8 and info.validation_examples == 4
    assert info.input_shape == (2,)
    assert _count(val) == 4


def test_tfrecord_verification_is_a_recipe_key(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "a.tfrecord")) as w:
        for i in range(6):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
            })).SerializeToString())
    features = {"x": {"dtype": "float32", "shape": [1]}, "label": {"dtype": "int64"}}
    config = DataConfig(source="tfrecords", path=str(tmp_path / "*.tfrecord"),
                        image_key="x", features=features, validation_split_name=None)
    assert config.verify_records is True
    _, _, info = _build(config)
    assert info.train_examples == 6  # counted by the verification pass
    _, _, unverified = _build(dataclasses.replace(config, verify_records=False))
    assert unverified.train_examples is None  # not read up front: the runner counts
    # Unverified with num_classes given: nothing read up front, labels checked as they
    # stream (a label >= num_classes stops the pipeline with a message naming it).
    train, _, known = _build(dataclasses.replace(config, verify_records=False, num_classes=2))
    assert known.num_classes == 2
    with pytest.raises(tf.errors.InvalidArgumentError, match="label outside 0..1"):
        _count(train)
    # One class cannot make a classifier (base.refuse_one_class): named as the data is built.
    with pytest.raises(DataError, match="^data.num_classes is 1 for data.path .*; a "
                                        "classifier needs at least 2 classes"):
        _build(dataclasses.replace(config, verify_records=False, num_classes=1))
    # A truncated file is named before training only when verified.
    data = (tmp_path / "a.tfrecord").read_bytes()
    (tmp_path / "a.tfrecord").write_bytes(data[:-7])
    with pytest.raises(DataError, match="a.tfrecord"):
        _build(config)


def test_python_source_from_a_file(tmp_path):
    (tmp_path / "mysource.py").write_text(
        "import numpy as np\n"
        "class Source:\n"
        "    num_classes = 3\n"
        "    def __len__(self): return 12\n"
        "    def __getitem__(self, i): return np.full((2,), i, np.float32), i % 3\n"
        "SOURCE = Source()\n")
    config = DataConfig(source="python", path=f"{tmp_path / 'mysource.py'}:SOURCE",
                        validation_fraction=0.25, workers=2, worker_mode="thread")
    train, val, info = _build(config)
    assert info.num_classes == 3 and info.input_shape == (2,)
    assert info.train_examples == 9 and _count(train) == 9 and _count(val) == 3


def test_errors_before_training(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        _build(DataConfig(source="image_folder", path=str(tmp_path / "x"), image_size=[4, 4]))
    with pytest.raises(DataError, match="matches no file"):
        _build(DataConfig(source="tfrecords", path=str(tmp_path / "*.rec"),
                          features={"label": {"dtype": "int64"}}))
    with pytest.raises(DataError, match="no attribute"):
        _build(DataConfig(source="python", path="tfaccel.errors:Nope"))
    config = dataclasses.replace(DataConfig(), source="tfds", name="tfaccel_no_such",
                                 data_dir=str(tmp_path))
    with pytest.raises(DataError, match="no dataset named"):
        _build(config)


@pytest.mark.slow
def test_builtin_default(shapes_data_dir):
    # The session's prepared data dir: preparing on first use from an empty folder (the same
    # tfds_source.load_builder) is checked by test_tfds.py's builtin round trip.
    config = DataConfig(source="builtin", data_dir=shapes_data_dir, augment=["flip", "crop"])
    train, val, info = _build(config, global_batch_size=128)
    assert info.num_classes == 4 and info.input_shape == (32, 32, 3)
    assert info.train_examples == 12_000 and info.validation_examples == 2_000
    x, y = next(iter(train))
    assert x.shape == (128, 32, 32, 3) and x.dtype == tf.float32


def test_arrays_read_classes_from_every_example_before_the_held_out_fraction(tmp_path):
    # The label rule reads the values (0 and 6: two classes, never 7 with five empty ones),
    # from the arrays before validation_fraction holds some out, so a class held out whole
    # is still a class.
    path = tmp_path / "d.npz"
    y = np.zeros(20, np.int64)
    y[7] = 6  # a label that only the held-out split may hold
    np.savez(path, x=np.zeros((20, 2), np.float32), y=y)
    config = DataConfig(source="arrays", path=str(path), validation_fraction=0.5, cache=None)
    info = _build(config)[2]
    assert info.num_classes == 2 and info.class_names == ["0", "6"]


@pytest.mark.parametrize("labels, message", [
    ([0, 1, 3], "label 3 .*data.num_classes is 3"),
    ([0, -1, 1], "label -1"),
])
def test_labels_outside_num_classes_are_a_data_error(tmp_path, labels, message):
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((3, 2), np.float32), y=np.array(labels))
    config = DataConfig(source="arrays", path=str(path), cache=None, num_classes=3)
    with pytest.raises(DataError, match=message):
        _build(config)


def test_tfrecord_labels_outside_num_classes_are_a_data_error(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "p.tfrecord")) as w:
        for label in (0, 1, 5):
            w.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            })).SerializeToString())
    config = DataConfig(source="tfrecords", path=str(tmp_path / "*.tfrecord"), num_classes=2,
                        image_key="x", features={"x": {"dtype": "float32"},
                                                 "label": {"dtype": "int64"}})
    with pytest.raises(DataError, match="label 5 .*data.num_classes is 2"):
        _build(config)


@pytest.mark.parametrize("replicas,steps,examples", [(1, 3, 10), (2, 2, 8)])
def test_steps_per_epoch_follow_the_one_drop_rule(tmp_path, replicas, steps, examples):
    # 10 examples, global batch 4: one device keeps the partial batch (3 steps, all 10
    # trained on); two replicas drop it (2 steps, 8 examples), as the dataset itself does.
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((10, 2), np.float32), y=np.arange(10) % 2)
    config = DataConfig(source="arrays", path=str(path), cache=None)
    train, _, info = _build(config, num_replicas=replicas)
    assert info.steps_per_epoch == steps
    assert info.train_examples_per_pass == examples
    assert sum(1 for _ in train) == steps and _count(train) == examples


def test_steps_per_epoch_unknown_for_a_generator_source(tmp_path):
    module = tmp_path / "gen_src.py"
    module.write_text("import numpy as np\n"
                      "num_classes = 2\n"
                      "def items(worker_index, num_workers):\n"
                      "    for i in range(worker_index, 6, num_workers):\n"
                      "        yield np.float32(i), np.int64(i % 2)\n")
    config = DataConfig(source="python", path=f"{module}:items", cache=None,
                        workers=1, worker_mode="thread", num_classes=2)
    _, _, info = _build(config)
    assert info.steps_per_epoch is None and info.train_examples_per_pass is None


@pytest.mark.parametrize("bad", [3, -1])
def test_python_source_label_outside_num_classes_stops_the_pipeline(tmp_path, bad):
    # Labels of a python source are only seen while streaming: the check is in the pipeline
    # (a label of 3 with 3 classes would otherwise crash on CPU or give NaN on GPU).
    (tmp_path / "badlabels.py").write_text(
        "import numpy as np\n"
        "class Source:\n"
        "    num_classes = 3\n"
        "    def __len__(self): return 8\n"
        f"    def __getitem__(self, i): return np.float32(i), ({bad} if i == 6 else i % 3)\n"
        "SOURCE = Source()\n")
    config = DataConfig(source="python", path=f"{tmp_path / 'badlabels.py'}:SOURCE",
                        validation_fraction=0.25, workers=1, worker_mode="thread",
                        cache=None)
    train, val, _ = _build(config)
    with pytest.raises(tf.errors.InvalidArgumentError, match="data.num_classes"):
        for ds in (train, val):
            for _ in ds:
                pass


def _text_folder(root, *, per_class=20):
    # Class words plus shared ones; lengths 3 to 30 words.
    words = {"neg": ["bad", "awful", "poor"], "pos": ["good", "great", "nice"]}
    for c, (name, own) in enumerate(words.items()):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            length = (3, 4, 30)[i % 3]
            text = " ".join((own + ["the", "a"])[(i + k) % 5] for k in range(length))
            (root / name / f"{i:02d}.txt").write_text(text, encoding="utf-8")
    return root


def test_a_text_folder_becomes_token_ids_in_batches_of_similar_length(tmp_path):
    root = _text_folder(tmp_path / "texts")
    config = DataConfig(source="text_folder", path=str(root), validation_fraction=0.25,
                        cache="memory")
    train, val, info = _build(config, global_batch_size=8)
    assert info.class_names == ["neg", "pos"] and info.num_classes == 2
    assert info.train_examples == 30 and info.validation_examples == 10
    # Keras' TextVectorization adapted on the training texts: the 8 words, padding, OOV.
    assert info.text == TextInfo(tokenizer="text_vectorization", vocabulary_size=10,
                                 max_length=None, batch_by_length=True, ngrams=1,
                                 char_ngrams=0)
    assert info.vectorizer.get_vocabulary()[:2] == ["", "[UNK]"]
    assert info.input_shape == (None,)
    assert _count(train) == 30 and _count(val) == 10
    for ids, _ in train:
        ids = ids.numpy()
        lengths = (ids != 0).sum(axis=1)
        assert ids.dtype == np.int32 and ids.shape[1] == lengths.max()  # its own longest


def test_text_batches_padded_to_the_longest_without_batch_by_length(tmp_path):
    root = _text_folder(tmp_path / "texts")
    config = DataConfig(source="text_folder", path=str(root), validation_split_name=None,
                        cache=None, text=TextConfig(batch_by_length=False, max_length=10))
    train, _, info = _build(config, global_batch_size=30)
    widths = {int(ids.shape[1]) for ids, _ in train}
    assert widths == {10}  # every batch holds a 30-word text, cut to max_length


@pytest.mark.parametrize("cache", ["memory", None])
def test_a_text_recipe_resumed_mid_pass_gets_exactly_the_rest_of_the_pass(tmp_path, cache):
    # Through the recipe path as the runner resumes (a stream at (pass, batch), the
    # recipe's default deterministic=False): batches by length are skipped after batching,
    # so the resumed pass must group the same texts (lengths tie: 3, 4 or 30 words).
    from tfaccel.data.tail import EpochStream

    root = tmp_path / "texts"
    for c, name in enumerate(["neg", "pos"]):
        (root / name).mkdir(parents=True)
        for i in range(60):
            words = [f"t{c}x{i}"] + ["the", "a", name] * 10  # the first word names the file
            (root / name / f"{i:02d}.txt").write_text(" ".join(words[:(3, 4, 30)[i % 3]]))
    config = DataConfig(source="text_folder", path=str(root), validation_split_name=None,
                        validation_fraction=0.0, cache=cache)

    def texts(first_pass=0, skip=0):
        train, _, info = _build(config, global_batch_size=4, deterministic=False,
                                stream=EpochStream(first_pass=first_pass, skip_batches=skip,
                                                   num_passes=2))
        vocabulary = info.vectorizer.get_vocabulary()
        return [tuple(vocabulary[int(row[0])] for row in ids.numpy()) for ids, _ in train]

    whole = texts()
    assert len(whole) == 60  # 2 passes of 30 batches
    for p in range(2):
        seen = [t for batch in whole[30 * p:30 * (p + 1)] for t in batch]
        assert sorted(seen) == sorted(f"t{c}x{i}" for c in range(2) for i in range(60))
    assert texts(first_pass=1, skip=11) == whole[41:]


@pytest.mark.parametrize("fraction, listings", [(0.0, 1), (0.25, 2)])
def test_a_text_folder_is_listed_and_checked_once_per_split(tmp_path, monkeypatch, fraction,
                                                            listings):
    # The vocabulary is adapted on the files the training split listed and checked: not a
    # third listing (and reading of every file) of its own.
    from tfaccel.data.sources import class_folder

    calls = []
    listing = class_folder.list_class_folder
    monkeypatch.setattr(class_folder, "list_class_folder",
                        lambda *a, **k: calls.append(a) or listing(*a, **k))
    config = DataConfig(source="text_folder", path=str(_text_folder(tmp_path / "texts")),
                        validation_fraction=fraction, validation_split_name=None, cache=None)
    train, _, info = _build(config, global_batch_size=8)
    assert len(calls) == listings
    assert info.text.vocabulary_size == 10 and _count(train) == 40 - int(40 * fraction)


def test_text_lines_files_are_each_scanned_once(tmp_path, monkeypatch):
    from tfaccel.data.sources import text_lines

    scanned = []
    scan = text_lines._scan
    monkeypatch.setattr(text_lines, "_scan", lambda path, **k: scanned.append(path)
                        or scan(path, **k))
    for f in range(4):
        (tmp_path / f"{f}.tsv").write_text("".join(f"{('a', 'b')[i % 2]}\tw{i} x{f}\n"
                                                   for i in range(5)))
    config = DataConfig(source="text_lines", path=str(tmp_path / "*.tsv"),
                        validation_fraction=0.25, cache=None)
    train, val, info = _build(config, global_batch_size=4)
    assert sorted(scanned) == sorted(str(p) for p in tmp_path.glob("*.tsv"))
    # Words w0..w4 of the 3 training files, their x<f>, padding and out-of-vocabulary.
    assert info.text.vocabulary_size == 2 + 5 + 3
    assert _count(train) == 15 and _count(val) == 5

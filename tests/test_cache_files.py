"""A file cache (data.cache: PATH) never serves stale data: fingerprinted, rebuilt after a kill."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.config.recipe import DataConfig
from tfaccel.data import cache_files
from tfaccel.data.from_recipe import build_datasets
from tfaccel.errors import DataError


def _write_arrays(path, offset):
    x = (np.arange(24, dtype=np.float32).reshape(12, 2) + offset)
    np.savez(path, x=x, y=np.arange(12) % 3)


def _features(config, seed=0):
    train, _, _ = build_datasets(config, global_batch_size=4, num_replicas=1, seed=seed,
                                 deterministic=True)
    return np.sort(np.concatenate([x.numpy()[:, 0] for x, _ in train]))


def _config(tmp_path, **kw):
    args = dict(source="arrays", path=str(tmp_path / "d.npz"), cache=str(tmp_path / "c" / "tr"),
                shuffle_buffer=0, validation_split_name=None)
    args.update(kw)
    return DataConfig(**args)


@pytest.fixture(autouse=True)
def _forget_prepared():
    # Each test plays a new process: what this process prepared earlier is forgotten.
    cache_files.forget_prepared()
    yield
    cache_files.forget_prepared()


def test_changed_source_file_rebuilds_the_cache_and_says_so(tmp_path, capsys):
    _write_arrays(tmp_path / "d.npz", 0)
    first = _features(_config(tmp_path))
    assert first[0] == 0.0 and os.path.exists(tmp_path / "c" / "tr.index")
    cache_files.forget_prepared()
    _write_arrays(tmp_path / "d.npz", 1000)
    os.utime(tmp_path / "d.npz", ns=(1, 1))  # a different mtime even on a coarse clock
    second = _features(_config(tmp_path))
    np.testing.assert_array_equal(second, first + 1000)  # the new data, not the cached one
    out = capsys.readouterr().out
    # The builder's own fingerprint (the arrays' contents) names what changed.
    assert f"cache {str(tmp_path / 'c' / 'tr')!r}" in out and "rebuilt" in out
    assert "(changed: examples)" in out


def test_changed_pipeline_setting_before_the_cache_rebuilds_it(tmp_path, capsys):
    _write_arrays(tmp_path / "d.npz", 0)
    _features(_config(tmp_path, validation_fraction=0.25))
    cache_files.forget_prepared()
    got = _features(_config(tmp_path, validation_fraction=0.5))
    assert len(got) == 6  # half held out now: the cache holds the new training subset
    assert "(changed: examples)" in capsys.readouterr().out


def test_unchanged_data_reuses_the_cache_and_settings_after_it_do_not_matter(tmp_path,
                                                                            capsys):
    _write_arrays(tmp_path / "d.npz", 0)
    _features(_config(tmp_path, shuffle_buffer=5))
    index = tmp_path / "c" / "tr.index"
    stamp = index.stat().st_mtime_ns
    cache_files.forget_prepared()
    capsys.readouterr()
    # The buffer's size acts after the cache: the cached examples are still right.
    _features(_config(tmp_path, shuffle_buffer=8))
    assert index.stat().st_mtime_ns == stamp
    assert "rebuilt" not in capsys.readouterr().out


def test_turning_shuffling_on_rebuilds_a_cache_made_in_file_order(tmp_path, capsys):
    # A buffer smaller than the data permutes the arrays before the cache (data.order): a
    # cache written in sorted order would otherwise be read in runs of one label.
    _write_arrays(tmp_path / "d.npz", 0)
    assert len(_features(_config(tmp_path, shuffle_buffer=0))) == 12
    cache_files.forget_prepared()
    capsys.readouterr()
    assert len(_features(_config(tmp_path, shuffle_buffer=5))) == 12
    assert "(changed: examples)" in capsys.readouterr().out


KILLED_WRITER = textwrap.dedent("""
    import os, sys
    import tensorflow as tf
    from tfaccel.data.from_recipe import build_datasets
    from tfaccel.config.recipe import DataConfig
    config = DataConfig(source="arrays", path=sys.argv[1], cache=sys.argv[2],
                        shuffle_buffer=0, validation_split_name=None)
    train, _, _ = build_datasets(config, global_batch_size=1, num_replicas=1, seed=0,
                                 deterministic=True)
    iterator = iter(train)
    next(iterator)
    next(iterator)
    os.kill(os.getpid(), 9)  # killed in the first epoch, the cache half written
""")


def test_cache_half_written_by_a_killed_run_is_rebuilt(tmp_path, capsys):
    _write_arrays(tmp_path / "d.npz", 0)
    config = _config(tmp_path)
    script = tmp_path / "writer.py"
    script.write_text(KILLED_WRITER)
    process = subprocess.run([sys.executable, str(script), config.path, config.cache],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert process.returncode == -signal.SIGKILL, process.stderr[-2000:]
    assert any(name.endswith(".lockfile") for name in os.listdir(tmp_path / "c"))
    got = _features(config)
    assert len(got) == 12 and got[0] == 0.0
    assert "half written" in capsys.readouterr().out
    assert os.path.exists(tmp_path / "c" / "tr.index")
    assert not any(name.endswith(".lockfile") for name in os.listdir(tmp_path / "c"))


HOLDER = textwrap.dedent("""
    import sys, time
    from tfaccel.data import cache_files
    cache_files.prepare_file_cache(sys.argv[1], fingerprint={"a": 1}, key="data.cache")
    print("ready", flush=True)
    time.sleep(60)
""")


def test_a_cache_another_live_process_is_building_is_refused(tmp_path):
    prefix = str(tmp_path / "c" / "tr")
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen([sys.executable, str(script), prefix], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(DataError, match="another running process"):
            cache_files.prepare_file_cache(prefix, fingerprint={"a": 2}, key="data.cache")
        # The same data: reading alongside is fine (TensorFlow reads a complete cache
        # without a lock); here the holder has not written it yet, so it is refused too.
        with pytest.raises(DataError, match="being written"):
            cache_files.prepare_file_cache(prefix, fingerprint={"a": 1}, key="data.cache")
    finally:
        holder.kill()
        holder.wait(timeout=10)
    # Once the other process is gone, the cache is this process's to rebuild.
    assert cache_files.prepare_file_cache(prefix, fingerprint={"a": 2},
                                          key="data.cache") == prefix


def test_directory_cache_keeps_its_prefix_and_validation_has_its_own(tmp_path):
    _write_arrays(tmp_path / "d.npz", 0)
    config = _config(tmp_path, cache=str(tmp_path / "cdir") + os.sep, validation_fraction=0.25)
    train, val, _ = build_datasets(config, global_batch_size=4, num_replicas=1, seed=0,
                                   deterministic=True)
    assert sum(1 for _ in train) == 3 and sum(1 for _ in val) == 1
    names = sorted(os.listdir(tmp_path / "cdir"))
    assert "tfdata_cache.index" in names and "tfdata_cache_validation.index" in names
    assert "tfdata_cache.tfaccel.json" in names


def test_memory_cache_is_untouched():
    assert cache_files.is_file_cache("memory") is False
    assert cache_files.is_file_cache(None) is False and cache_files.is_file_cache("") is False
    assert cache_files.is_file_cache("/tmp/x") is True


def test_tf_reads_only_complete_cache_files(tmp_path):
    # The facts the rules above rely on (TensorFlow 2.21): a complete cache is PREFIX.index +
    # PREFIX.data-*, an interrupted writer leaves PREFIX_0.lockfile behind.
    prefix = str(tmp_path / "p")
    list(tf.data.Dataset.range(5).cache(prefix))
    assert sorted(os.listdir(tmp_path)) == ["p.data-00000-of-00001", "p.index"]


# The library path: each builder fingerprints its own file cache (the same rule as a recipe).

def _png_folder(root, start, stop):
    for i in range(start, stop):
        folder = root / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:04d}.png").write_bytes(
            tf.io.encode_png(np.full((2, 2, 3), i % 256, np.uint8)).numpy())


def _count(dataset):
    return sum(int(np.asarray(y).shape[0]) for _, y in dataset)


def test_image_folder_file_cache_sees_images_added_between_calls(tmp_path, capsys):
    from tfaccel import data

    _png_folder(tmp_path / "imgs", 0, 200)
    cache = str(tmp_path / "cachefile")

    def build():
        return data.from_image_folder(tmp_path / "imgs", batch_size=64, image_size=(2, 2),
                                      cache=cache, seed=0)

    assert _count(build()) == 200
    _png_folder(tmp_path / "imgs", 200, 300)
    assert _count(build()) == 300  # was 200: the old cache served as it was
    assert "(changed: order, source files)" in capsys.readouterr().out
    capsys.readouterr()
    stamp = os.stat(cache + ".index").st_mtime_ns
    assert _count(build()) == 300  # unchanged data: the cache is read, not rebuilt
    assert os.stat(cache + ".index").st_mtime_ns == stamp
    assert "rebuilt" not in capsys.readouterr().out


def test_image_folder_decode_setting_change_rebuilds_the_file_cache(tmp_path, capsys):
    from tfaccel import data

    _png_folder(tmp_path / "imgs", 0, 8)
    cache = str(tmp_path / "c")
    first = data.from_image_folder(tmp_path / "imgs", batch_size=8, image_size=(2, 2),
                                   cache=cache, shuffle=False)
    assert [x.shape[1:3] for x, _ in first] == [(2, 2)]  # read to the end: cache complete
    assert os.path.exists(cache + ".index")
    second = data.from_image_folder(tmp_path / "imgs", batch_size=8, image_size=(3, 3),
                                    cache=cache, shuffle=False)
    assert next(iter(second))[0].shape[1:3] == (3, 3)  # not the cached 2x2 images
    assert "(changed: image_size)" in capsys.readouterr().out


def test_image_folder_given_labels_are_part_of_the_file_cache(tmp_path, capsys):
    # Keras' labels=[...] are cached with the images: other labels must rebuild the cache.
    from tfaccel import data

    _png_folder(tmp_path / "imgs", 0, 4)
    cache = str(tmp_path / "c")

    def labels_read(given):
        ds = data.from_image_folder(tmp_path / "imgs", batch_size=4, image_size=(2, 2),
                                    cache=cache, shuffle=False, labels=given)
        return [v for _, y in ds for v in y.numpy().tolist()]  # a whole epoch: cache written

    assert labels_read([0, 1, 0, 1]) == [0, 1, 0, 1]
    assert labels_read([1, 1, 0, 0]) == [1, 1, 0, 0]  # not the cached labels
    assert "(changed: labels)" in capsys.readouterr().out


def test_tfrecords_file_cache_sees_a_new_file(tmp_path):
    from tfaccel import data

    def write(name, n):
        with tf.io.TFRecordWriter(str(tmp_path / name)) as writer:
            for i in range(n):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))}))
                    .SerializeToString())

    def build():
        return data.from_tfrecords(str(tmp_path / "*.tfrecord"), batch_size=4,
                                   features={"x": {"dtype": "float32"},
                                             "label": {"dtype": "int64"}},
                                   cache=str(tmp_path / "cache" / "tr"))

    write("a.tfrecord", 6)
    assert _count(build()) == 6
    write("b.tfrecord", 5)
    assert _count(build()) == 11


def test_arrays_file_cache_sees_changed_values(tmp_path):
    from tfaccel import data

    def first_values(x):
        ds = data.from_arrays(x, np.zeros(len(x), np.int64), batch_size=8, shuffle_buffer=0,
                              cache=str(tmp_path / "c"))
        return np.concatenate([b.numpy()[:, 0] for b, _ in ds])

    x = np.arange(8, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(first_values(x), np.arange(8))
    np.testing.assert_array_equal(first_values(x + 100), np.arange(8) + 100)


def test_optimize_on_a_plain_dataset_says_once_it_cannot_fingerprint(tmp_path, caplog):
    from tfaccel import data

    cache = str(tmp_path / "plain")
    with caplog.at_level("WARNING", logger="tfaccel.data.tail.stages"):
        for _ in range(2):
            list(data.optimize(tf.data.Dataset.range(5), batch_size=5, cache=cache))
    said = [r.getMessage() for r in caplog.records if "cannot know" in r.getMessage()]
    assert len(said) == 1 and "cache_fingerprint" in said[0] and cache in said[0]


def test_optimize_rebuilds_when_the_given_fingerprint_changes(tmp_path, capsys):
    from tfaccel import data

    cache = str(tmp_path / "plain")

    def values(n):
        ds = data.optimize(tf.data.Dataset.range(n), batch_size=10, cache=cache,
                           cache_fingerprint={"n": n})
        return [int(v) for b in ds for v in b.numpy()]

    assert values(3) == [0, 1, 2]
    assert values(5) == [0, 1, 2, 3, 4]
    assert "(changed: n)" in capsys.readouterr().out

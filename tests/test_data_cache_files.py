"""A file cache (data.cache: PATH) never serves stale data: fingerprinted, rebuilt after a kill."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tfaccel.data import cache_files
from tfaccel.data.config import build_datasets
from tfaccel.errors import DataError
from tfaccel.recipe import DataConfig


def _write_arrays(path, offset):
    x = (np.arange(24, dtype=np.float32).reshape(12, 2) + offset)
    np.savez(path, x=x, y=np.arange(12) % 3)


def _features(config, seed=0):
    train, _, _ = build_datasets(config, global_batch_size=4, num_replicas=1, seed=seed,
                                 deterministic=True)
    return np.sort(np.concatenate([x.numpy()[:, 0] for x, _ in train]))


def _config(tmp_path, **kw):
    args = dict(source="arrays", path=str(tmp_path / "d.npz"), cache=str(tmp_path / "c" / "tr"),
                shuffle_buffer=0, validation_split=None)
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
    assert "data.cache" in out and "rebuilt" in out and "source files" in out


def test_changed_pipeline_setting_before_the_cache_rebuilds_it(tmp_path, capsys):
    _write_arrays(tmp_path / "d.npz", 0)
    _features(_config(tmp_path, validation_fraction=0.25))
    cache_files.forget_prepared()
    got = _features(_config(tmp_path, validation_fraction=0.5))
    assert len(got) == 6  # half held out now: the cache holds the new training subset
    assert "data.validation_fraction" in capsys.readouterr().out


def test_unchanged_data_reuses_the_cache_and_settings_after_it_do_not_matter(tmp_path,
                                                                            capsys):
    _write_arrays(tmp_path / "d.npz", 0)
    _features(_config(tmp_path))
    index = tmp_path / "c" / "tr.index"
    stamp = index.stat().st_mtime_ns
    cache_files.forget_prepared()
    capsys.readouterr()
    # shuffle_buffer and augment act after the cache: the cached examples are still right.
    _features(_config(tmp_path, shuffle_buffer=5))
    assert index.stat().st_mtime_ns == stamp
    assert "rebuilt" not in capsys.readouterr().out


KILLED_WRITER = textwrap.dedent("""
    import os, sys
    import tensorflow as tf
    from tfaccel.data.config import build_datasets
    from tfaccel.recipe import DataConfig
    config = DataConfig(source="arrays", path=sys.argv[1], cache=sys.argv[2],
                        shuffle_buffer=0, validation_split=None)
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

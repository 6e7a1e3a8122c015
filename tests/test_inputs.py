"""The training input (training/model_setup/inputs.py): the stream at any step, built once."""

import numpy as np
import pytest

from tfaccel.config.batching import plan_batches
from tfaccel.config.recipe import recipe_from_dict
from tfaccel.data import from_recipe
from tfaccel.training.model_setup.inputs import build_data

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _recipe(data_dir, **data):
    return recipe_from_dict({
        "seed": 3,
        "data": {"source": "builtin", "data_dir": data_dir, "train_split": "train[:96]",
                 "validation_split_name": "test[:16]", "shuffle_buffer": 96, **data},
        "model": {"name": "small_cnn"},
        "training": {"epochs": 2, "global_batch_size": 32},
    })


def _batches(dataset, count):
    return [(x.numpy(), y.numpy()) for x, y in dataset.take(count)]


def _built(recipe, monkeypatch):
    builds = []
    real = from_recipe.build_datasets

    def counting(*args, **kwargs):
        builds.append(kwargs.get("stream"))
        return real(*args, **kwargs)

    monkeypatch.setattr(from_recipe, "build_datasets", counting)
    data = build_data(recipe, plan_batches(global_batch_size=32, replicas=1),
                      deterministic=True)
    return data, builds


def test_the_next_part_of_a_run_reuses_the_memory_cached_stream(shapes_data_dir,
                                                                monkeypatch):
    # steps_per_execution auto trains its first epoch, then asks for the stream at the
    # epoch's end: the same batches as a stream rebuilt there, without a second build.
    recipe = _recipe(shapes_data_dir)
    data, builds = _built(recipe, monkeypatch)
    steps = data.steps_per_epoch
    assert steps == 3 and len(builds) == 1
    first = _batches(data.make_stream(0), steps)  # the first epoch fills the cache
    later = _batches(data.make_stream(steps), 2 * steps)
    assert len(builds) == 1
    rebuilt, _ = _built(recipe, monkeypatch)
    rebuilt.make_stream(0)  # the first stream is handed out once
    expected = _batches(rebuilt.make_stream(steps), 2 * steps)  # a rebuild at that step
    assert len(later) == len(expected) == 6
    for (x, y), (ex, ey) in zip(later, expected):
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)
    # Pass 1 is another order of the same examples than pass 0.
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(first, later))


@pytest.mark.parametrize("cache, step", [("", 3), ("memory", 4)])
def test_a_stream_is_rebuilt_without_a_memory_cache_or_beyond_the_first_pass(
        shapes_data_dir, monkeypatch, tmp_path, cache, step):
    # Without a memory cache, skipping a pass would decode it again; past the first pass
    # (a resume) the skip would grow with the run: both rebuild at the step.
    data, builds = _built(_recipe(shapes_data_dir, cache=cache), monkeypatch)
    data.make_stream(0)
    data.make_stream(step)
    assert len(builds) == 2
    assert (builds[1].first_pass, builds[1].skip_batches) == divmod(step, 3)


def _table_and_text_recipes(folder):
    """A csv table and a text folder, 128 examples each: (recipe, the adapting function)."""
    rng = np.random.default_rng(0)
    (folder / "rows.csv").write_text("a,kind,label\n" + "".join(
        f"{a:.3f},{'xyz'[i % 3]},{int(a > 0)}\n" for i, a in enumerate(rng.normal(size=128))))
    for label in ("no", "yes"):
        (folder / "texts" / label).mkdir(parents=True)
        for i in range(64):
            (folder / "texts" / label / f"{i}.txt").write_text(f"{label} text number {i}")
    common = {"validation_fraction": 0.25, "shuffle_buffer": 128, "cache": None}
    table = {"source": "csv", "path": str(folder / "rows.csv"), "label_key": "label", **common}
    texts = {"source": "text_folder", "path": str(folder / "texts"), **common}
    return [(table, "tfaccel.data.table_features.adapt_feature_space"),
            (texts, "tfaccel.data.text_vectors.adapt_vectorizer")]


@pytest.mark.parametrize("which", [0, 1], ids=["feature-space", "vocabulary"])
def test_a_stream_at_a_resume_point_reuses_the_adapted_vocabulary_or_feature_space(
        tmp_path, monkeypatch, which):
    # A resumed run's stream (and the next part of fit) is built again at its step: it
    # encodes with what the first build adapted, without another pass over the training
    # split to adapt the same FeatureSpace or vocabulary again.
    data_keys, adapter = _table_and_text_recipes(tmp_path)[which]
    module, name = adapter.rsplit(".", 1)
    target = __import__(module, fromlist=[name])
    real, calls = getattr(target, name), []

    def counting(*args, **kwargs):
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, counting)
    recipe = recipe_from_dict({"seed": 3, "data": data_keys,
                               "training": {"epochs": 2, "global_batch_size": 32}})
    data, builds = _built(recipe, monkeypatch)
    steps = data.steps_per_epoch
    assert steps == 3 and calls == [name]
    whole = _batches(data.make_stream(0), 2 * steps)
    resumed = _batches(data.make_stream(steps + 1), steps - 1)
    assert len(builds) == 2 and calls == [name]  # built again at the step, adapted once
    # The same batches, encoded the same, as the uninterrupted stream from that step.
    assert len(resumed) == steps - 1
    for (x, y), (ex, ey) in zip(resumed, whole[steps + 1:]):
        np.testing.assert_array_equal(x, ex)
        np.testing.assert_array_equal(y, ey)

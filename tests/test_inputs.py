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

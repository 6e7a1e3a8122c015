"""Tests for tfaccel.engine.batching."""

import pytest

from tfaccel.engine.batching import derive_batch_sizes
from tfaccel.errors import UserInputError


def test_from_steps():
    assert derive_batch_sizes(global_batch=256, replicas=2, steps=4) == {
        "global_batch": 256,
        "replicas": 2,
        "per_replica_batch": 128,
        "accumulation_steps": 4,
        "micro_batch": 32,
    }


def test_from_micro_batch_and_defaults():
    assert derive_batch_sizes(global_batch=256, replicas=2, micro_batch=32)["accumulation_steps"] == 4
    assert derive_batch_sizes(global_batch=64)["micro_batch"] == 64
    assert derive_batch_sizes(global_batch=64, steps=2, micro_batch=32)["accumulation_steps"] == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"global_batch": 30, "replicas": 4}, "global batch 30 is not divisible by the 4 replicas"),
        ({"global_batch": 96, "replicas": 2, "steps": 5}, r"per-replica batch 48 .* 5 accumulation steps; .* multiple of 10"),
        ({"global_batch": 96, "micro_batch": 40}, "micro_batch 40 does not divide the per-replica batch 96"),
        (
            {"global_batch": 96, "steps": 2, "micro_batch": 16},
            r"16 x 2 accumulation steps x 1 replicas = 32, not the global batch 96",
        ),
        ({"global_batch": 0}, "global_batch must be an integer >= 1; got 0"),
        ({"global_batch": 8, "steps": 1.5}, "accumulation steps must be an integer >= 1; got 1.5"),
    ],
)
def test_errors_show_the_arithmetic(kwargs, message):
    with pytest.raises(UserInputError, match=message):
        derive_batch_sizes(**kwargs)

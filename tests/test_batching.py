"""The batch plan: global batch = replicas x accumulation steps x micro-batch."""

import pytest

from tfaccel.config.batching import plan_batches
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_plan_from_accumulation_steps():
    plan = plan_batches(global_batch_size=128, replicas=2, accumulation_steps=4)
    assert (plan.per_replica_batch_size, plan.micro_batch_size) == (64, 16)
    assert "2 replica(s) x 4 accumulation step(s) x micro-batch 16" in plan.describe()


def test_plan_from_micro_batch_size():
    plan = plan_batches(global_batch_size=96, replicas=2, micro_batch_size=12)
    assert plan.accumulation_steps == 4
    assert plan.as_dict()["global_batch_size"] == 96


def test_default_is_no_accumulation():
    plan = plan_batches(global_batch_size=10, replicas=1)
    assert (plan.accumulation_steps, plan.micro_batch_size) == (1, 10)


@pytest.mark.parametrize("kwargs, expected", [
    ({"global_batch_size": 9, "replicas": 2}, "not divisible by the 2 replicas"),
    ({"global_batch_size": 12, "replicas": 2, "accumulation_steps": 4},
     "per-replica batch 6 (global batch 12 / 2 replicas) is not divisible by "
     "accumulation_steps 4; use a global batch that is a multiple of 8"),
    ({"global_batch_size": 12, "replicas": 1, "micro_batch_size": 5},
     "micro_batch_size 5 does not divide the per-replica batch 12"),
    ({"global_batch_size": 0, "replicas": 1}, "global_batch_size must be >= 1, got 0"),
])
def test_bad_plans_name_the_numbers(kwargs, expected):
    with pytest.raises(UserInputError) as caught:
        plan_batches(**kwargs)
    assert expected in str(caught.value)

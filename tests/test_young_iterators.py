"""The suite's plugin that frees the tf.data iterators a test left in reference cycles."""

import gc
import weakref

import pytest
import tensorflow as tf
import young_iterators

FAST_TIER = True


def _end_of_a_test():
    wrapper = young_iterators.pytest_runtest_teardown(item=None, nextitem=None)
    next(wrapper)  # the test's own teardown runs here
    with pytest.raises(StopIteration):
        wrapper.send(None)


def test_an_iterator_left_in_a_cycle_is_freed_at_the_end_of_its_test():
    gc.disable()  # no automatic pass may free it first
    try:
        young_iterators._made_in_this_test.clear()
        holder = {"iterator": iter(tf.data.Dataset.range(3).prefetch(tf.data.AUTOTUNE))}
        holder["self"] = holder  # a cycle: only a GC pass frees it
        freed = weakref.ref(holder["iterator"])
        del holder
        assert freed() is not None
        assert len(young_iterators._made_in_this_test) == 1
        _end_of_a_test()
        assert freed() is None
        assert young_iterators._made_in_this_test == []
    finally:
        gc.enable()


def test_no_pass_runs_when_the_tests_iterators_are_gone(monkeypatch):
    young_iterators._made_in_this_test.clear()
    for _ in iter(tf.data.Dataset.range(2)):  # freed by its count when the loop ends
        pass
    passes = []
    monkeypatch.setattr(gc, "collect", lambda *args: passes.append(args))
    _end_of_a_test()
    assert passes == []


def test_what_was_alive_once_the_tests_were_collected_is_frozen():
    assert gc.get_freeze_count() > 100_000  # TensorFlow's and Keras' import, at least

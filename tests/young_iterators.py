"""Frees the tf.data iterators a test leaves in reference cycles right after it, while they are young.

TensorFlow 2.21 deletes an iterator by cancelling its autotuning thread, which can miss the
wake-up (`Model::OptimizeLoop` re-checks the cancellation before `StartCancel` has marked it
done) and then sleeps out its optimisation period; the period doubles with the iterator's
age up to 60 s. An iterator held by a reference cycle (a `fit` that raised, through its
traceback; a run's model and callbacks) dies in the next full GC pass, minutes later, in
whichever test triggers it: single passes stalled a worker 10-76 s, the machine idle. Made
young, the same deletion waits at most about its age (seconds; the GC-freed ones were at most
14 s old in a run). The objects alive once the tests are collected
(TensorFlow, Keras, the test modules) are frozen out of the collector, so a pass after a
test walks what the tests made, not the whole import.
"""

import gc
import weakref

import pytest

_made_in_this_test = []


def _track(cls):
    original = cls.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _made_in_this_test.append(weakref.ref(self))

    cls.__init__ = __init__


def pytest_configure(config):
    from tensorflow.python.data.ops import iterator_ops, multi_device_iterator_ops

    _track(iterator_ops.OwnedIterator)
    _track(multi_device_iterator_ops.OwnedMultiDeviceIterator)


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the test's fixtures are torn down
    left = any(made() is not None for made in _made_in_this_test)
    _made_in_this_test.clear()
    if left:
        gc.collect()

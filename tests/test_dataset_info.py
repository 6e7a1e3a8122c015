"""Tests of data/dataset_info.py: a typed DatasetInfo, loud on a misspelt field, same summary."""

import dataclasses
import json

import pytest

from tfaccel.data.dataset_info import DatasetInfo, TableInfo, TextInfo

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_construction_with_a_misspelt_field_raises_naming_it():
    with pytest.raises(TypeError, match="num_clases"):
        DatasetInfo(num_clases=3)
    # A source that builds keyword dicts gets the same at once (DatasetInfo(**known)).
    with pytest.raises(TypeError, match="vocab_size"):
        TextInfo(**{"tokenizer": "wordpiece", "vocab_size": 10, "max_length": None,
                    "batch_by_length": False, "ngrams": 1, "char_ngrams": 0})


def test_a_misspelt_attribute_raises_and_no_field_can_be_changed():
    info = DatasetInfo(num_classes=3, input_shape=(4, 4, 3))
    with pytest.raises(AttributeError, match="num_clases"):
        info.num_clases
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.num_classes = 4
    changed = dataclasses.replace(info, validation_padding_fraction=0.25)
    assert (changed.validation_padding_fraction, info.validation_padding_fraction) == (0.25,
                                                                                        None)
    assert changed.num_classes == 3 and changed.input_shape == (4, 4, 3)


def test_the_summary_has_the_keys_of_the_old_info_dict_and_no_objects():
    # An image folder on one worker: the keys summary.json had before (no text, table,
    # worker_sharding or padding fraction; no class_names, which stand beside it), and the
    # task with its output width.
    info = DatasetInfo(num_classes=2, num_outputs=2, class_names=["a", "b"], train_examples=8,
                       validation_examples=2, input_shape=(4, 4, 3), steps_per_epoch=2,
                       train_examples_per_pass=8, data_service=None)
    assert info.summary() == {"task": "classification", "num_outputs": 2,
                              "num_classes": 2, "train_examples": 8,
                              "validation_examples": 2, "input_shape": (4, 4, 3),
                              "steps_per_epoch": 2, "train_examples_per_pass": 8,
                              "data_service": None}
    # A table and a text run on two workers: nested infos as the dicts runs wrote before;
    # the adapted layers (objects) are never written.
    table = DatasetInfo(num_classes=2, input_shape=(12,), worker_sharding="file",
                        table=TableInfo(numeric=["a"], categorical=["c"], ignored=[],
                                        features=12), feature_space=object(),
                        validation_padding_fraction=0.0)
    text = DatasetInfo(text=TextInfo(tokenizer="text_vectorization", vocabulary_size=10,
                                     max_length=None, batch_by_length=True, ngrams=1,
                                     char_ngrams=0), vectorizer=object())
    written = json.loads(json.dumps(table.summary()))
    # Since the column plan: date columns and imputed means beside them (said, not
    # recorded: the plan's line and notes).
    assert written["table"] == {"numeric": ["a"], "categorical": ["c"], "ignored": [],
                                "features": 12, "date": [], "imputed": {}}
    assert written["worker_sharding"] == "file" and "feature_space" not in written
    assert written["validation_padding_fraction"] == 0.0  # 0.0 is set, so it is shown
    assert json.loads(json.dumps(text.summary()))["text"] == {
        "tokenizer": "text_vectorization", "vocabulary_size": 10, "max_length": None,
        "batch_by_length": True, "ngrams": 1, "char_ngrams": 0}
    assert "vectorizer" not in text.summary()

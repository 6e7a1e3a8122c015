"""Runs a test class shipped in the installed Keras against a tfaccel builder.

Used by the ``test_*_keras_suite.py`` modules: each imports Keras' own test module
(nothing copied), replaces the Keras function it calls by a thin adapter onto a tfaccel
builder, and runs every test method. A test that fails for a deliberate, documented
difference is listed in the module's DIFFERENCES (strict xfail: it must keep failing, so
the list stays true); the same list is a table in docs/data.md.
"""

import unittest
from pathlib import Path

import pytest

GRAIN = ('`format="grain"` returns a Grain dataset, not `tf.data` (and Grain is not '
         "installed)")


def tf_format_only(format: str, *, builder: str) -> None:
    """Keras' ``format="tf"`` is the only one: tfaccel's builders return `tf.data`."""
    if format != "tf":
        raise AssertionError(f"{builder} returns a tf.data.Dataset; got format={format!r}.")


def suite(test_class, *, module, function: str, adapter, differences: dict, expected: str,
          at_least: int, heading: str):
    """The three tests of a Keras suite module, for it to bind at module level.

    Args:
        test_class: Keras' test case class.
        module: The Keras module whose `function` the tests call, replaced by `adapter`.
        function: Its name there, e.g. "text_dataset_from_directory".
        adapter: The thin adapter onto the tfaccel builder.
        differences: Test name -> why it fails on purpose (strict xfail).
        expected: A test name that must be in the suite (a renamed suite fails).
        at_least: How many non-grain tests the suite must have.
        heading: The bold heading in docs/data.md after which the table is.

    Returns:
        ``(is_found, docs_table, keras_test)``: the suite is there; the docs table lists
        the skipped and xfail tests; every Keras test, parametrized by name.
    """
    params = cases(test_class, differences)

    def is_found():
        check_found(params, differences=differences, expected=expected, at_least=at_least)

    def docs_table():
        check_docs_table(params, differences=differences, heading=heading)

    @pytest.mark.parametrize("name", params)
    def keras_test(name, monkeypatch):
        monkeypatch.setattr(module, function, adapter)
        run(test_class, name)

    return is_found, docs_table, keras_test


def cases(test_class, differences: dict) -> list:
    """One pytest param per test method of `test_class`: grain ones skipped, differences xfail."""
    cases = []
    for name in unittest.TestLoader().getTestCaseNames(test_class):
        marks = []
        if name.endswith("_grain"):
            marks.append(pytest.mark.skip(reason=GRAIN))
        elif name in differences:
            marks.append(pytest.mark.xfail(strict=True, reason=differences[name]))
        cases.append(pytest.param(name, marks=marks, id=name))
    return cases


def check_found(params, *, differences: dict, expected: str, at_least: int) -> None:
    """A Keras upgrade that renames or drops the suite must fail here, not pass silently."""
    names = [p.values[0] for p in params]
    assert expected in names
    assert len([n for n in names if not n.endswith("_grain")]) >= at_least
    assert set(differences) <= set(names)


def check_docs_table(params, *, differences: dict, heading: str) -> None:
    """docs/data.md's table after `heading` lists the skipped and xfail tests, and only those."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "data.md").read_text()
    table = docs[docs.index(heading):]
    # Only this loader's table: up to the next section (another loader's table follows).
    table = table[:table.index("\n## ")] if "\n## " in table else table
    grain = [p for p in params if p.values[0].endswith("_grain")]
    if grain:  # (Keras' audio suite has none)
        assert f"| every `*_grain` test ({len(grain)}) | skipped | {GRAIN} |" in table
    for name, reason in differences.items():
        assert f"| `{name}` | xfail | {reason} |" in table
    if not differences:
        assert "| (none) | xfail | no deliberate difference fails a Keras test |" in table


def run(test_class, name: str) -> None:
    """Runs one test method as pytest would: set-up, test, tear-down; a failure raises."""
    case = test_class(name)
    try:
        case.debug()
    finally:
        case.doCleanups()  # the temporary folders, also after a failure

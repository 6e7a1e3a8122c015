"""The one message helper: `tfaccel.messages.say`, and that nothing prints beside it."""

import pathlib
import re

from tfaccel.messages import say

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "tfaccel"


def test_say_prints_one_prefixed_line_on_stdout(capsys):
    say("the training source does not declare its size.")
    captured = capsys.readouterr()
    assert captured.out == "tfaccel: the training source does not declare its size.\n"
    assert captured.err == ""


def test_no_module_below_the_cli_prints_a_tfaccel_message_itself():
    # The CLI speaks through click.echo; every layer under it goes through `say`.
    printing = re.compile(r"""print\(\s*f?["']tfaccel: """)
    found = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if "cli" not in path.relative_to(PACKAGE).parts and path.name != "messages.py"
             and printing.search(path.read_text(encoding="utf-8"))]
    assert found == []

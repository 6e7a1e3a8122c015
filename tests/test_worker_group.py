"""A launch's processes together (tfaccel/cli/worker_group.py): output prefixed or logged, the
first failure's code, a hanging worker killed after the grace period, a signal named."""

import io
import sys
import textwrap

from tfaccel.cli import worker_group

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _group(scripts, grace=1.0):
    out = io.StringIO()
    commands = [[sys.executable, "-c", textwrap.dedent(s)] for s in scripts]
    group = worker_group.WorkerGroup(commands, [None] * len(scripts),
                               labels=[f"w{i}" for i in range(len(scripts))], out=out,
                               grace_seconds=grace)
    return group, out


def test_group_prefixes_output_and_succeeds_when_all_succeed():
    group, out = _group(["print('hello from a')", "print('hello from b')"])
    assert group.run() == 0
    lines = out.getvalue().splitlines()
    assert "[w0] hello from a" in lines and "[w1] hello from b" in lines


def test_a_logged_worker_s_lines_go_to_its_file_and_its_failure_names_the_file(tmp_path):
    logs = {"w1": tmp_path / "w1.log"}
    out = io.StringIO()
    group = worker_group.WorkerGroup(
        [[sys.executable, "-c", "print('epoch 1 of the chief')"],
         [sys.executable, "-c", "print('epoch 1 of w1'); import sys; sys.exit(3)"]],
        [None, None], labels=["w0", "w1"], out=out, grace_seconds=1.0, logs=logs)
    assert group.run() == 3
    text = out.getvalue()
    assert "[w0] epoch 1 of the chief" in text.splitlines()
    assert "epoch 1 of w1" not in text
    assert logs["w1"].read_text() == "epoch 1 of w1\n"
    assert f"failed: w1 exited first with code 3 (its output: {logs['w1']})." in text


def test_a_local_launch_logs_every_worker_but_the_chief(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(worker_group.tempfile, "tempdir", None)  # TMPDIR read again
    logs = worker_group.worker_logs(["w1", "w2"])
    folder = logs["w1"].parent
    assert folder.is_dir() and folder.parent == tmp_path
    assert logs == {"w1": folder / "w1.log", "w2": folder / "w2.log"}
    assert worker_group.worker_logs([]) == {}


def test_first_failing_worker_sets_the_code_and_a_hanging_one_is_killed():
    group, out = _group(["import sys; sys.exit(3)",
                         "import time; time.sleep(600)"], grace=1.0)
    assert group.run() == 3
    text = out.getvalue()
    assert "w0 exited with code 3" in text
    assert "killing w1" in text
    assert "failed: w0 exited first with code 3" in text
    assert all(p.poll() is not None for p in group.processes)


def test_a_worker_killed_by_a_signal_is_named_and_gives_128_plus_the_signal():
    group, out = _group(["import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                         "import time; time.sleep(600)"], grace=0.5)
    assert group.run() == 137
    assert "w0 exited with signal SIGKILL" in out.getvalue()

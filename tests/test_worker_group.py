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


def _dies_twice(counter):
    """A serving task that kills itself the first two times it starts, then serves."""
    return f"""
        import os, pathlib, signal, time
        counter = pathlib.Path({str(counter)!r})
        starts = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(starts + 1))
        print(f"start {{starts + 1}}", flush=True)
        if starts < 2:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(600)
    """


def _serving_group(scripts, *, restarts, labels=("chief", "ps0", "w0")):
    out = io.StringIO()
    commands = [[sys.executable, "-c", textwrap.dedent(s)] for s in scripts]
    policy = worker_group.RestartPolicy([l for l in labels if l.startswith("w")],
                                        limit=restarts)
    group = worker_group.WorkerGroup(
        commands, [None] * len(scripts), labels=list(labels), out=out, grace_seconds=1.0,
        servers=len(scripts) - 1, restarts=policy,
        addresses={"ps0": "127.0.0.1:2001", "w0": "127.0.0.1:2002"})
    return group, out


def test_a_worker_that_dies_twice_is_restarted_twice_at_its_address(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_group, "RESTART_DELAY_SECONDS", 0.05)
    counter = tmp_path / "starts"
    group, out = _serving_group(["import time; time.sleep(6)", "import time; time.sleep(600)",
                                 _dies_twice(counter)], restarts=3)
    assert group.run() == 0  # the chief's code
    text = out.getvalue()
    assert counter.read_text() == "3"  # started, restarted twice, then served
    for number in (1, 2):
        assert (f"[launch] w0 (127.0.0.1:2002) exited with signal SIGKILL; restarting it at "
                f"the same address (restart {number} of 3): the chief's coordinator runs "
                "steps on it again once it answers.") in text.splitlines()
    assert "[w0] start 3" in text.splitlines()
    assert "carries on without it" not in text
    assert group.restarts.used == {"w0": 2}
    assert all(p.poll() is not None for p in group.processes)  # the servers stopped after


def test_restarts_are_bounded_per_worker_and_a_ps_is_never_restarted(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_group, "RESTART_DELAY_SECONDS", 0.05)
    group, out = _serving_group(
        ["import time; time.sleep(6)", "import sys; sys.exit(1)",
         _dies_twice(tmp_path / "starts")], restarts=1)
    assert group.run() == 0
    lines = out.getvalue().splitlines()
    assert "[launch] ps0 (127.0.0.1:2001) exited with code 1; the chief carries on without " \
        "it (a lost ps stops it with a message)." in lines
    assert sum("restarting it" in line for line in lines) == 1
    assert "[launch] w0 (127.0.0.1:2002) exited with signal SIGKILL (its 1 restart(s) used); " \
        "the chief carries on without it (a lost ps stops it with a message)." in lines
    assert (tmp_path / "starts").read_text() == "2"


def test_the_restart_policy_counts_each_worker_apart():
    policy = worker_group.RestartPolicy(["w0", "w1"], limit=2)
    assert [policy.next_restart("w0") for _ in range(3)] == [1, 2, None]
    assert policy.next_restart("w1") == 1
    assert policy.next_restart("ps0") is None
    assert worker_group.RestartPolicy(["w0"], limit=0).next_restart("w0") is None

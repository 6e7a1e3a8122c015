"""`tfaccel launch --ps 1 --workers 2` with real processes on 127.0.0.1: the step count is
exact, a worker killed mid-run is restarted and taken back by the coordinator (twice), or
tolerated without it (--restarts 0), a lost parameter server stops the run with a message
and `--resume` finishes it.

Each test starts 4 TensorFlow processes (a chief, a ps, 2 workers) on a tiny model: all
are marked `slow` and `multiworker`, run under a timeout; the ps-loss one is `heavy`.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from launch_helpers import PS_STEPS_PER_EPOCH as STEPS_PER_EPOCH
from launch_helpers import (
    TIMEOUT_SECONDS,
    child_env,
    children,
    kill_tree,
    parameter_server_recipe,
    run_tfaccel,
)

pytestmark = [pytest.mark.slow, pytest.mark.multiworker]


def _recipe(tmp_path, *, epochs):
    return parameter_server_recipe(tmp_path, epochs=epochs)


def _launch_and_kill(tmp_path, args, *, victim, after, signum=signal.SIGKILL):
    """Runs a launch; signals task `victim` (e.g. "w1"; "launch": the launcher itself) once
    a line matches `after`."""
    return _launch_with_actions(tmp_path, args, [(after, victim, signum)])


def _launch_with_actions(tmp_path, args, actions):
    """Runs a launch; for each ``(pattern, task, signal)`` of `actions` in turn, once a line
    matches `pattern`, sends `signal` to `task`: "launch" (the launcher), "chief", or a
    serving task ("w1": the process that serves as worker 1 by then)."""
    process = subprocess.Popen([sys.executable, "-m", "tfaccel.cli", "launch", *args],
                               env=child_env(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                               start_new_session=True)
    lines, pids, done = [], {"launch": process.pid}, 0
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        for line in process.stdout:
            lines.append(line)
            found = re.match(r"\[(\w+)\] .* serving on .* \(pid (\d+)\)", line)
            if found:
                pids[found.group(1)] = int(found.group(2))
            if done < len(actions) and re.search(actions[done][0], line):
                task, signum = actions[done][1:]
                os.kill(pids[task] if task != "chief" else _chief_pid(process.pid), signum)
                done += 1
            if time.monotonic() > deadline:
                raise AssertionError("timed out:\n" + "".join(lines[-60:]))
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            kill_tree(process.pid)
    assert done == len(actions), "".join(lines[-60:])
    return process.returncode, "".join(lines)


def _chief_pid(launcher: int) -> int:
    """The launcher's child that runs ``tfaccel.cli ... train`` (the chief)."""
    from pathlib import Path

    for pid in children(launcher):
        if b"tfaccel.cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    raise AssertionError(f"no chief among the children of {launcher}")


def _run_dir(tmp_path):
    (run,) = list((tmp_path / "runs").iterdir())
    return run


def _epochs(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.heavy  # 1-3 minutes; cheaper: test_worker_group's restarts, test_lost_ps_worker
def test_a_worker_killed_twice_comes_back_twice_and_every_step_is_counted_once(tmp_path):
    epochs = 6
    recipe = _recipe(tmp_path, epochs=epochs)
    # While the restarted worker imports TensorFlow (a minute on a loaded machine) the
    # chief is paused, so the run cannot end first (the launcher says the restart before
    # it starts the process, so its "serving" line always comes after).
    restarting, serving = r"\[launch\] w1 .* restarting it", r"\[w1\] worker 1 serving on"
    code, output = _launch_with_actions(
        tmp_path, ["--ps", "1", "--workers", "2", "--", "train", str(recipe)], [
            (rf"\[chief\] tfaccel: epoch 1/{epochs}", "w1", signal.SIGKILL),
            (restarting, "chief", signal.SIGSTOP), (serving, "chief", signal.SIGCONT),
            (r"\[chief\] tfaccel: worker 1 .* is back", "w1", signal.SIGKILL),
            (restarting, "chief", signal.SIGSTOP), (serving, "chief", signal.SIGCONT)])
    assert code == 0, output[-4000:]
    address = re.search(r"\[w1\] worker 1 serving on (\S+) ", output).group(1)
    restarts = [output.index(f"[launch] w1 ({address}) exited with signal SIGKILL; restarting "
                             f"it at the same address (restart {n} of 3)") for n in (1, 2)]
    # The chief names the loss, then the worker back at its address, once per death.
    lost = [m.start() for m in re.finditer(
        rf"\[chief\] tfaccel: worker 1 \({re.escape(address)}, "
        r"/job:worker/replica:0/task:1\) is unreachable", output)]
    back = [m.start() for m in re.finditer(
        rf"\[chief\] tfaccel: worker 1 \({re.escape(address)}, "
        r"/job:worker/replica:0/task:1\) is back: TensorFlow's coordinator took it again",
        output)]
    assert len(lost) == 2 and len(back) == 2, output[-6000:]
    assert restarts[0] < back[0] < restarts[1] < back[1], output[-6000:]
    assert lost[0] < back[0] < lost[1] < back[1]
    assert output.count("[w1] worker 1 serving on") == 3  # started, then twice again
    run = _run_dir(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["steps_completed"] == epochs * STEPS_PER_EPOCH  # exact: every step once
    assert (summary["workers"], summary["parameter_servers"]) == (2, 1)
    assert [(e["epoch"], e["step"]) for e in _epochs(run)] == [
        (epoch, epoch * STEPS_PER_EPOCH) for epoch in range(1, epochs + 1)]
    per_worker = re.search(r"steps run by each worker: worker 0 \(\S+\) (\d+), worker 1 "
                           r"\(\S+\) (\d+)\.", output)
    assert sum(map(int, per_worker.groups())) == epochs * STEPS_PER_EPOCH, per_worker.group(0)
    assert summary["final_metrics"]["val_accuracy"] > 0.8  # it learned across the losses


@pytest.mark.heavy  # about a minute; the restart policy: tests/test_worker_group.py
def test_with_restarts_0_a_killed_worker_stays_out_and_every_step_is_counted_once(tmp_path):
    recipe = _recipe(tmp_path, epochs=4)
    code, output = _launch_and_kill(
        tmp_path, ["--ps", "1", "--workers", "2", "--restarts", "0", "--", "train",
                   str(recipe)], victim="w1", after=r"\[chief\] tfaccel: epoch 1/4")
    assert code == 0, output[-4000:]
    lost = output.index("exited with signal SIGKILL; the chief carries on without it")
    assert "[chief] tfaccel: epoch 4/4" in output[lost:]  # epochs trained after the loss
    assert "restarting it" not in output and " is back:" not in output
    summary = json.loads((_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["steps_completed"] == 4 * STEPS_PER_EPOCH


@pytest.mark.heavy  # two launches (about 2 minutes on 2 loaded cores)
def test_a_lost_parameter_server_stops_the_run_and_resume_finishes_it(tmp_path):
    recipe = _recipe(tmp_path, epochs=3)
    code, output = _launch_and_kill(
        tmp_path, ["--ps", "1", "--workers", "2", "--", "train", str(recipe)],
        victim="ps0", after=r"\[chief\] tfaccel: epoch 1/3")
    assert code != 0
    assert re.search(r"parameter server 127\.0\.0\.1:\d+ \(/job:ps/replica:0/task:0\) is "
                     r"unreachable .* the run "
                     r"stopped after \d+ completed step\(s\)", output), [
        line for line in output.splitlines() if "Error:" in line]
    assert "Traceback" not in output
    run = _run_dir(tmp_path)
    stopped = json.loads((run / "summary.json").read_text())
    assert stopped["status"] == "failed" and stopped["steps_completed"] >= STEPS_PER_EPOCH
    code, output = run_tfaccel(["launch", "--ps", "1", "--workers", "2", "--", "train",
                                "--resume", run], tmp_path=tmp_path)
    assert code == 0, output[-4000:]
    assert "resuming from checkpoint step-" in output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps_completed"] == 3 * STEPS_PER_EPOCH
    assert [e["epoch"] for e in _epochs(run)] == [1, 2, 3]  # each epoch once


@pytest.mark.heavy  # four launches of one task each (about a minute on 2 loaded cores)
def test_a_cluster_given_by_hosts_trains_with_one_launch_per_task(tmp_path):
    from tfaccel.cli.tf_configs import free_ports

    recipe = _recipe(tmp_path, epochs=1)
    run_dir = tmp_path / "runs" / "by-hosts"
    hosts = ",".join(f"127.0.0.1:{port}" for port in free_ports(4))
    processes = [subprocess.Popen(
        [sys.executable, "-m", "tfaccel.cli", "launch", "--ps", "1", "--hosts", hosts,
         "--index", str(index), "--", "train", str(recipe), "--run-dir", str(run_dir)],
        env=child_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=tmp_path, start_new_session=True) for index in range(4)]
    try:
        chief_output = processes[0].communicate(timeout=TIMEOUT_SECONDS)[0]
        # Each task's own launch ends once the chief's port stops answering.
        server_outputs = [p.communicate(timeout=60)[0] for p in processes[1:]]
    finally:
        for process in processes:
            kill_tree(process.pid)
    assert processes[0].returncode == 0, chief_output[-4000:]
    assert [p.returncode for p in processes[1:]] == [0, 0, 0], server_outputs
    assert "the chief (127.0.0.1:" in server_outputs[0] and "is gone; stopping." in \
        server_outputs[0]
    assert "[launch] chief 0 of a cluster of 4" in chief_output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps_completed"] == STEPS_PER_EPOCH
    assert (summary["workers"], summary["parameter_servers"]) == (2, 1)


@pytest.mark.heavy  # two launches (about a minute and a half on 2 loaded cores)
def test_sigterm_saves_a_checkpoint_on_the_chief_and_resume_is_exact_in_steps(tmp_path):
    recipe = _recipe(tmp_path, epochs=4)
    code, output = _launch_and_kill(
        tmp_path, ["--ps", "1", "--workers", "2", "--", "train", str(recipe)],
        victim="launch", after=r"\[chief\] tfaccel: epoch 1/4", signum=signal.SIGTERM)
    assert code == 143, output[-4000:]
    assert "[launch] stopped on request (code 143); the chief saved a checkpoint." in output
    assert re.search(r"stopped by signal SIGTERM at step \d+; checkpoint step-\d+ "
                     r"saved", output)
    run = _run_dir(tmp_path)
    code, output = run_tfaccel(["launch", "--ps", "1", "--workers", "2", "--", "train",
                                "--resume", run], tmp_path=tmp_path)
    assert code == 0, output[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps_completed"] == 4 * STEPS_PER_EPOCH
    assert [e["step"] for e in _epochs(run)] == [40, 80, 120, 160]

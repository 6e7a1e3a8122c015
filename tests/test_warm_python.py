"""tests/warm_python.py: a warm run behaves as ``python ARGS`` would, only without the import."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import warm_python

SCRIPT = textwrap.dedent("""
    import os, random, sys
    print("argv", sys.argv[1:], "cwd", os.getcwd(), "name", __name__)
    print("path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
    print("env", os.environ.get("WARM_TEST_VALUE"), "tmp", __import__("tempfile").gettempdir())
    print("stdin", sys.stdin.read().strip())
    print("to stderr", file=sys.stderr)
    print("tensorflow loaded", "tensorflow" in sys.modules, file=sys.stderr)
    print("random", random.random(), file=sys.stderr)
    sys.exit(int(sys.argv[1]))
""")


def _env(tmp_path, **extra):
    return dict(os.environ, WARM_TEST_VALUE="seen", TMPDIR=str(tmp_path), **extra)


def _run(command, env, *, warm, cwd, stdin=""):
    if warm:
        command, env = warm_python.command_and_env(command, env, at_once=True)
        assert command[1] == warm_python.CLIENT
    else:
        env = dict(env, TFACCEL_TESTS_COLD="1")
    return subprocess.run(command, env=env, cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_a_warm_run_prints_and_exits_as_a_cold_one(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    runs = {warm: _run([sys.executable, str(script), "3", "x y"], _env(tmp_path), warm=warm,
                       cwd=tmp_path, stdin="hello\n") for warm in (False, True)}
    cold, warm = runs[False], runs[True]
    assert (warm.returncode, cold.returncode) == (3, 3)
    assert warm.stdout == cold.stdout
    assert warm.stdout.splitlines() == [
        f"argv ['3', 'x y'] cwd {tmp_path} name __main__", "path0 True",
        f"env seen tmp {tmp_path}", "stdin hello"]
    assert "to stderr" in warm.stderr and "to stderr" in cold.stderr
    # The fork has TensorFlow already (the point); a cold interpreter does not.
    assert "tensorflow loaded True" in warm.stderr
    assert "tensorflow loaded False" in cold.stderr


def test_two_warm_runs_draw_different_random_numbers(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    draws = {[line for line in _run([sys.executable, str(script), "0"], _env(tmp_path),
                                    warm=True, cwd=tmp_path).stderr.splitlines()
              if line.startswith("random")][0] for _ in range(2)}
    assert len(draws) == 2


def test_module_and_code_runs_and_an_uncaught_error(tmp_path):
    module = _run([sys.executable, "-m", "tfaccel.cli", "--version"], _env(tmp_path),
                  warm=True, cwd=tmp_path)
    assert module.returncode == 0 and module.stdout.startswith("tfaccel")
    code = _run([sys.executable, "-c", "import sys; print(sys.argv); raise ValueError('no')",
                 "a"], _env(tmp_path), warm=True, cwd=tmp_path)
    assert code.returncode == 1 and code.stdout == "['-c', 'a']\n"
    assert code.stderr.rstrip().endswith("ValueError: no")
    assert "warm_python" not in code.stderr  # the fork's own frame is not shown


# A warm run's own children: one that imports TensorFlow (`-m`, or code naming tensorflow,
# keras or tfaccel) is a fork of the same server, a plain Python one a real interpreter.
# Each prints whether TensorFlow was loaded before its first line and whether TensorFlow's
# devices were set up (never, in the server: CUDA_VISIBLE_DEVICES is each run's own).
CHILDREN = textwrap.dedent("""
    import subprocess, sys
    probe = ("import sys; loaded = 'tensorflow' in sys.modules; "
             "from tensorflow.python.eager import context; "
             "print(loaded, context.context()._initialized)")
    plain = "import sys; print('tensor' + 'flow' in sys.modules)"  # names none of the three
    for code in (probe, plain):
        print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.strip())
""")


def test_a_warm_run_s_children_that_import_tensorflow_are_warm_too(tmp_path):
    warm = _run([sys.executable, "-c", CHILDREN], _env(tmp_path), warm=True, cwd=tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.splitlines() == ["True False", "False"]
    cold = _run([sys.executable, "-c", CHILDREN], _env(tmp_path), warm=False, cwd=tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout.splitlines() == ["False False", "False"]


@pytest.mark.parametrize("variable", ["TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH", "TFACCEL_TESTS_COLD"])
def test_an_import_time_variable_of_its_own_runs_cold(tmp_path, variable):
    command, env = warm_python.command_and_env([sys.executable], _env(tmp_path), at_once=True)
    env[variable] = "1"  # differs from the server's: TensorFlow would read it at import
    done = subprocess.run([*command, "-c", "import sys; print('tensorflow' in sys.modules)"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "False\n")


def test_flags_the_client_does_not_know_run_cold(tmp_path):
    command, env = warm_python.command_and_env([sys.executable], _env(tmp_path), at_once=True)
    done = subprocess.run([*command, "-u", "-c", "import sys; print('tensorflow' in sys.modules)"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "False\n")


SLEEPER = ("import signal, sys, time\n"
           "print('ready', flush=True)\n"
           "time.sleep(60)\n")


def _started(tmp_path):
    command, env = warm_python.command_and_env([sys.executable, "-c", SLEEPER],
                                               _env(tmp_path), at_once=True)
    process = warm_python.WarmPopen(command, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    return process


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_the_client_ends_the_run_as_it_would_a_cold_one(tmp_path, number):
    process = _started(tmp_path)
    with open(process._pid_file) as file:
        run = int(file.read())
    process.send_signal(number)
    assert process.wait(timeout=30) == -number
    if number == signal.SIGINT:
        assert process.stderr.read().rstrip().endswith("KeyboardInterrupt")
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{run}") and time.monotonic() < deadline:
        time.sleep(0.05)  # the supervisor reaps it: no zombie left behind
    assert not os.path.exists(f"/proc/{run}")
    process.stdout.close()
    process.stderr.close()


def test_a_killed_client_takes_its_run_with_it(tmp_path):
    process = _started(tmp_path)
    with open(process._pid_file) as file:
        run = int(file.read())
    os.kill(process.pid, signal.SIGKILL)  # not through WarmPopen: the client alone
    assert process.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{run}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{run}")
    process.stdout.close()
    process.stderr.close()


def test_a_server_ends_when_the_test_process_that_started_it_ends_without_atexit(tmp_path):
    # xdist's workers end without running atexit: their servers (0.8 GB each) must not stay.
    starter = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(os.path.dirname(warm_python.__file__))!r})
        import warm_python
        server = warm_python.Server(dict(os.environ))
        print(server.process.pid, flush=True)
        os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, TFACCEL_TESTS_COLD="1"))
    server = int(done.stdout.split()[0])
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{server}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{server}"), "the server outlived its test process"


def test_at_the_limit_the_least_recently_used_server_stops_for_a_new_one(monkeypatch):
    # Was: past MAX_SERVERS environments every new one ran cold, so which tests got a warm
    # run depended on what their process had run before (test order under xdist).
    started, stopped = [], []

    class FakeServer:
        def __init__(self, env):
            self.home = env["HOME"]
            started.append(self.home)

        def stop(self):
            stopped.append(self.home)

    monkeypatch.setattr(warm_python, "Server", FakeServer)
    monkeypatch.setattr(warm_python, "_servers", warm_python.collections.OrderedDict())
    monkeypatch.setattr(warm_python, "_asked", {})
    monkeypatch.setattr(warm_python, "MAX_SERVERS", 2)
    for home in ("/a", "/b", "/a", "/c", "/a", "/b"):
        assert warm_python.server_for({"HOME": home}, at_once=True).home == home
    assert started == ["/a", "/b", "/c", "/b"]
    assert stopped == ["/b", "/c"]  # /a, used again before each new one, stayed
    assert list(warm_python._servers) == [(("HOME", "/a"),), (("HOME", "/b"),)]
    assert warm_python.server_for({"HOME": "/d"}) is None  # a first, not at once: cold
    assert stopped == ["/b", "/c"]

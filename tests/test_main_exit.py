"""`tfaccel train`'s end: the process exits without the interpreter's teardown, when safe."""

import subprocess
import sys
import textwrap

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _run(tmp_path, body):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import atexit, sys, threading, time
        from tfaccel.cli.main import exit_without_teardown
        atexit.register(lambda: open(sys.argv[1], "w").write("atexit ran"))
        sys.stdout.write("unflushed")
    """) + textwrap.dedent(body))
    marker = tmp_path / "marker"
    done = subprocess.run([sys.executable, str(script), str(marker)], capture_output=True,
                          text=True, timeout=60)
    return done, marker


def test_the_atexit_functions_run_and_the_output_is_flushed(tmp_path):
    done, marker = _run(tmp_path, """
        exit_without_teardown(3)
        print("not reached")
    """)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "unflushed"
    assert marker.read_text() == "atexit ran"


def test_a_running_non_daemon_thread_keeps_the_normal_exit(tmp_path):
    # A normal exit waits for such a thread; os._exit would kill it mid-work.
    done, marker = _run(tmp_path, """
        threading.Thread(target=lambda: time.sleep(0.5)).start()
        exit_without_teardown(3)
        print(" returned")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "unflushed returned\n"
    assert marker.read_text() == "atexit ran"

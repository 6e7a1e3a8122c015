"""A pre-warmed Python for the suite's subprocesses: TensorFlow imported once, forked per run.

Most of the suite's time went to child processes importing TensorFlow (4-6 s each, about 200
of them). A server imports TensorFlow, Keras and tfaccel once; each run is a fork of it that
behaves as ``python ARGS`` would: its own process (group), the caller's stdin/stdout/stderr
(passed over a Unix socket), working directory, environment and arguments, its exit code
(or the signal that killed it) returned by the client, SIGINT/SIGTERM/SIGHUP forwarded to it.

Used two ways: conftest puts `WarmPopen` in place of subprocess.Popen (every
``[sys.executable, ...]`` command a test starts), and a caller that writes the command down
for later (the docs' `python`/`tfaccel` wrappers) asks `command_and_env` for it:

    command, env = warm_python.command_and_env([sys.executable], env, at_once=True)

The client (this file run as a script) falls back to the real interpreter (``exec``) when no
server answers, the arguments are not ``-m MODULE``, ``-c CODE`` or ``SCRIPT`` (flags such as
``-u`` or ``-X``), or the run's environment differs from the server's in a variable read at
import time (`IMPORT_TIME_KEYS`): such a run would not be what a fresh interpreter does.
``TFACCEL_TESTS_COLD=1`` turns the server off for a whole suite run (every process cold), or
for one run when its own environment says so (tests/tf_free.py's).

Not for tests about start-up itself (TensorFlow's import lines, what `--help` imports): those
start real interpreters.
"""

import atexit
import collections
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

SOCKET_ENV = "TFACCEL_WARM_SOCKET"
PID_FILE_ENV = "TFACCEL_WARM_PID_FILE"  # where a run writes its pid (WarmPopen asks for it)
COLD_ENV = "TFACCEL_TESTS_COLD"
CLIENT = os.path.abspath(__file__)
# Read when TensorFlow, Keras, TFDS or tfaccel are imported (or fixed for the interpreter's
# life): a run whose value differs from the server's starts a real interpreter. Not
# CUDA_VISIBLE_DEVICES: the CUDA driver reads it when TensorFlow first lists its devices,
# which the server's imports never do (tests/test_warm_python.py checks), so each run's own
# value counts.
IMPORT_TIME_KEYS = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONUNBUFFERED",
                    "PYTHONSAFEPATH", "HOME", "XLA_FLAGS", "OMP_NUM_THREADS", "LD_PRELOAD",
                    "LD_LIBRARY_PATH")
IMPORT_TIME_PREFIXES = ("TF_", "KERAS_", "TFDS_", "TFACCEL_", "MKL_", "ONEDNN_", "DNNL_")
_NOT_IMPORT_TIME = {"TF_CONFIG", SOCKET_ENV, PID_FILE_ENV}  # read when used, not when imported
# What the server imports before it forks: most of a `tfaccel train` run's import time.
WARM_MODULES = ("numpy", "tensorflow", "keras", "tfaccel.cli.main",
                "tfaccel.training.run.runner", "tfaccel.data", "tfaccel.tools.export")
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                     signal.SIGUSR2)


def import_time_environment(env: dict) -> dict:
    """The part of `env` a fresh interpreter reads while importing (see IMPORT_TIME_KEYS)."""
    return {key: value for key, value in env.items() if key not in _NOT_IMPORT_TIME and (
        key in IMPORT_TIME_KEYS or key.startswith(IMPORT_TIME_PREFIXES))}


# ------------------------------------------------------------------------ the caller's side

_REAL_POPEN = subprocess.Popen  # before conftest swaps in WarmPopen
_servers = collections.OrderedDict()  # import-time environment (sorted items) -> Server, oldest use first
_asked = {}  # import-time environment -> runs asked for
_servers_lock = threading.Lock()
# A server costs one cold start (~6 s) and ~0.8 GB: one is started for an environment at its
# second run (a one-off environment runs cold), and a test process keeps a few at most, the
# least recently used stopped for a new one (a run that had just reached it goes cold).
MAX_SERVERS = 4


class Server:
    """One warm server process, started with `env`, listening on a socket in a temp dir."""

    def __init__(self, env: dict):
        self.folder = tempfile.mkdtemp(prefix="warm-python-")
        self.path = os.path.join(self.folder, "socket")
        self.process = _REAL_POPEN(
            # stdin: a pipe only this process holds open (and a fork of it, while it lives);
            # the server ends at its EOF, when this process is gone however it ended
            # (xdist's workers end without atexit).
            [sys.executable, CLIENT, "--serve", self.path], env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True)
        line = self.process.stdout.readline()  # "ready" once imported and listening
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"the warm Python server did not start: {line!r}")
        atexit.register(self.stop)

    def stop(self) -> None:
        """Stops the server (runs already forked go on)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        try:
            os.unlink(self.path)
            os.rmdir(self.folder)
        except OSError:
            pass


def server_for(env: dict, *, at_once: bool = False):
    """The warm server for `env`'s import-time variables (started at the environment's second
    run, or its first `at_once`), or None: run cold."""
    key = tuple(sorted(import_time_environment(env).items()))
    with _servers_lock:
        _asked[key] = _asked.get(key, 0) + 1
        if key in _servers:
            _servers.move_to_end(key)
        elif at_once or _asked[key] >= 2:
            while len(_servers) >= MAX_SERVERS:
                _servers.popitem(last=False)[1].stop()
            _servers[key] = Server(env)
        return _servers.get(key)


def command_and_env(command, env: dict, *, at_once: bool = False):
    """``(command, env)`` to pass to subprocess: `command` run in a warm interpreter.

    Args:
        command: a command whose first word is ``sys.executable`` (others are returned as
            they are).
        env: the run's environment (a server whose import-time variables match is used, or
            started).
        at_once: start the server for this first run (the docs' wrappers name it once for
            every later run), not at the environment's second.

    Returns:
        ``[sys.executable, CLIENT, *command[1:]]`` and `env` naming the server's socket;
        `command` and `env` unchanged with ``TFACCEL_TESTS_COLD=1``.
    """
    command = [os.fspath(word) for word in command]
    if (os.environ.get(COLD_ENV) == "1" or env.get(COLD_ENV) == "1" or not command
            or command[0] != sys.executable or command[1:2] == [CLIENT]):
        return command, env
    server = server_for(env, at_once=at_once)
    if server is None:
        return command, env
    return [sys.executable, CLIENT, *command[1:]], dict(env, **{SOCKET_ENV: server.path})


_run_socket = None  # in a warm run: its server's socket, for the run's own children


def _loads_tensorflow(args) -> bool:
    """Whether ``python ARGS`` runs a module, or code naming TensorFlow, Keras or tfaccel:
    what would cost a real interpreter seconds of imports."""
    words = [os.fspath(word) for word in args[1:]]
    return words[:1] == ["-m"] or (words[:1] == ["-c"] and len(words) > 1 and any(
        name in words[1] for name in ("tensorflow", "keras", "tfaccel")))


class WarmPopen(_REAL_POPEN):
    """subprocess.Popen whose ``[sys.executable, ...]`` commands run warm (conftest puts it
    in place of subprocess.Popen for every test not marked ``cold_python``).

    ``kill()`` kills the run itself (and its process group) before its client, so that once
    ``wait()`` returns the run is gone, as a cold process would be: a test that kills a
    process and then takes the lock it held must not race the client's supervisor.
    """

    def __init__(self, args, *positional, **keywords):
        self._pid_file = None
        if (isinstance(args, (list, tuple)) and args and not keywords.get("shell")
                and not positional and keywords.get("executable") is None
                and os.fspath(args[0]) == sys.executable):
            env = keywords.get("env")
            env = dict(os.environ) if env is None else dict(env)
            if _run_socket is None:
                args, env = command_and_env(args, env)
            elif _loads_tensorflow(args) and env.get(COLD_ENV) != "1":
                # In a warm run: its own server (which runs cold what does not match it).
                args = [sys.executable, CLIENT, *map(os.fspath, args[1:])]
                env[SOCKET_ENV] = _run_socket
            if SOCKET_ENV in env:
                self._pid_file = os.path.join(tempfile.mkdtemp(prefix="warm-run-"), "pid")
                env[PID_FILE_ENV] = self._pid_file
            keywords["env"] = env
        super().__init__(args, *positional, **keywords)

    def send_signal(self, sig):
        if sig == signal.SIGKILL and self._pid_file and self.returncode is None:
            try:
                with open(self._pid_file) as file:
                    os.killpg(int(file.read()), signal.SIGKILL)
                # The client ends as its run did (-9) once the supervisor reaped the run.
                return
            except (OSError, ValueError):
                pass  # not started yet, or gone: the client's supervisor kills it
        super().send_signal(sig)


def run_pid(pid: int) -> int:
    """The pid of the run a warm client `pid` started (its children are the run's), or `pid`
    itself for any other process (or a client whose run has not started)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = dict(e.split(b"=", 1) for e in file.read().split(b"\0") if b"=" in e)
        with open(environ[PID_FILE_ENV.encode()]) as file:
            return int(file.read())
    except (OSError, KeyError, ValueError):
        return pid


# ------------------------------------------------------------------------------ the client


def _cold(arguments) -> None:
    os.execv(sys.executable, [sys.executable, *arguments])


def _die_of(number: int) -> None:
    """Ends this process by signal `number` (its parent sees returncode -number)."""
    if number not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught
        signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


def _exit_like(status: str) -> None:
    kind, value = status.split()
    if kind == "signal":  # die of the same signal, as the run did
        _die_of(int(value))
    os._exit(int(value))


def client(arguments) -> None:
    """Runs ``python ARGUMENTS`` in the warm server named by $TFACCEL_WARM_SOCKET, or cold."""
    path = os.environ.get(SOCKET_ENV)
    if not path or not arguments or (arguments[0].startswith("-")
                                      and arguments[0] not in ("-m", "-c")):
        _cold(arguments)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        _cold(arguments)
    request = json.dumps({"argv": list(arguments), "cwd": os.getcwd(),
                          "env": dict(os.environ)}).encode()
    socket.send_fds(connection, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
    reader = connection.makefile("r")
    answer = reader.readline().split()
    if answer[:1] != ["pid"]:
        connection.close()
        _cold(arguments)  # the server says this run would not be a fresh interpreter's
    pid = int(answer[1])
    for number in FORWARDED_SIGNALS:
        signal.signal(number, lambda received, _frame: _forward(pid, received))
    line = reader.readline()
    _exit_like(line if line.strip() else "exit 1")  # no status: the run's supervisor died


def _forward(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


# ------------------------------------------------------------------------------ the server


def serve(path: str) -> None:
    """Imports WARM_MODULES, listens on `path`, forks a run per connection; never returns."""
    import importlib

    for name in WARM_MODULES:
        importlib.import_module(name)
    own = import_time_environment(dict(os.environ))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        ready = select.select([listener, 0], [], [])[0]
        if 0 in ready and not os.read(0, 1):
            os._exit(0)  # the test process that started this server is gone (see Server)
        if listener not in ready:
            continue
        connection, _ = listener.accept()
        while True:  # reap the supervisors that ended
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        try:
            header, fds, _, _ = socket.recv_fds(connection, 8, 3)
            size = int.from_bytes(header, "big")
            body = b""
            while len(body) < size:
                body += connection.recv(size - len(body))
            request = json.loads(body)
        except (OSError, ValueError):
            connection.close()
            continue
        if import_time_environment(request["env"]) != own:
            connection.sendall(b"cold\n")
        elif os.fork() == 0:
            listener.close()
            _supervise(connection, fds, request)  # never returns
        for fd in fds:
            os.close(fd)
        connection.close()


def _supervise(connection, fds, request) -> None:
    """The forked supervisor: forks the run, tells the client its pid, then its status."""
    pid = os.fork()
    if pid == 0:
        connection.close()
        _run(fds, request)  # never returns
    try:
        for fd in fds:
            os.close(fd)
        status = None
        try:
            connection.sendall(f"pid {pid}\n".encode())
            status = _wait_run(pid, connection)
        except OSError:  # the client is gone (killed): so is its run, and at once
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        if status is None:
            _, status = os.waitpid(pid, 0)
        message = (f"signal {os.WTERMSIG(status)}\n" if os.WIFSIGNALED(status)
                   else f"exit {os.waitstatus_to_exitcode(status)}\n")
        connection.sendall(message.encode())
    finally:  # whatever happened, never back into the server's loop
        os._exit(0)


def _wait_run(pid: int, connection) -> int:
    """The run's wait status once it ends; OSError if the client goes first."""
    try:
        watched = os.pidfd_open(pid)  # Linux 5.3+: wakes at the run's end
    except (AttributeError, OSError):
        watched = None  # an older kernel: look every 50 ms
    while True:
        if watched is None:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
        waiting = [connection] if watched is None else [watched, connection]
        ready = select.select(waiting, [], [], None if watched else 0.05)[0]
        if watched is not None and watched in ready:
            return os.waitpid(pid, 0)[1]
        if connection in ready and not connection.recv(1):
            raise ConnectionResetError  # EOF: the client is gone


def _run(fds, request) -> None:
    """The forked run: becomes ``python ARGV`` in the client's directory and environment."""
    import ctypes
    import random
    import runpy

    supervisor = os.getppid()
    # Dies with its supervisor, whatever ends that (PR_SET_PDEATHSIG = 1): never an orphan.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != supervisor:
        os._exit(1)
    os.setsid()  # a group of its own: a client killed takes the run's children with it
    pid_file = request["env"].get(PID_FILE_ENV)
    if pid_file:  # written by the run itself before its first line: kill() finds it from then
        with open(pid_file + ".part", "w") as file:
            file.write(str(os.getpid()))
        os.replace(pid_file + ".part", pid_file)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # Its own children that would import TensorFlow (a launch's workers, ps tasks) are
    # forks of the same server too when their import-time variables match it (the server
    # answers "cold" otherwise); plain Python helpers (a watchdog) start real interpreters.
    global _run_socket
    _run_socket = os.environ.pop(SOCKET_ENV, None)
    os.environ.pop(PID_FILE_ENV, None)
    if _run_socket:
        subprocess.Popen = WarmPopen
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = open(0, "r", closefd=False)
    sys.stdout = open(1, "w", closefd=False, buffering=1 if os.isatty(1) else -1)
    if unbuffered:
        sys.stdout.reconfigure(write_through=True)
    sys.stderr = open(2, "w", closefd=False, buffering=1, errors="backslashreplace")
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    for number in FORWARDED_SIGNALS + (signal.SIGCHLD,):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as CPython sets them at start-up
    signal.signal(signal.SIGINT, signal.default_int_handler)
    random.seed()  # a fresh interpreter's generators start from fresh entropy
    sys.modules["numpy"].random.seed()
    tempfile.tempdir = None  # $TMPDIR is the run's
    argv = request["argv"]
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = argv[1:]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:  # as CPython: the traceback, then death by SIGINT (-2)
        _print_traceback()
        code = -signal.SIGINT
    except BaseException:  # as the interpreter does: the traceback, then exit 1
        _print_traceback()
        code = 1
    try:
        threading._shutdown()  # wait for non-daemon threads, then atexit: Python's order
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 1
    if code < 0:
        _die_of(-code)
    os._exit(code)


def _print_traceback() -> None:
    kind, value, trace = sys.exc_info()
    value.with_traceback(trace.tb_next)  # without this file's frame
    sys.excepthook(kind, value, trace.tb_next)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        client(sys.argv[1:])

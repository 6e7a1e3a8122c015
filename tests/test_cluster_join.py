"""engine/cluster_join.py: the workers of a cluster meet in Python before TensorFlow's wait."""

import socket
import threading

import pytest

from tfaccel.cli.launch import free_ports
from tfaccel.engine.cluster_join import ClusterJoin

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def _tasks(ports):
    return [(f"worker {i}", f"127.0.0.1:{p}") for i, p in enumerate(ports)]


def _wait_in_threads(joins, *, start_after=()):
    """Runs each join's wait in a thread (the ones in `start_after` 0.5 s later)."""
    errors = []

    def run(join, delay):
        try:
            threading.Event().wait(delay)
            join.wait()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(j, 0.5 if i in start_after else 0),
                                daemon=True) for i, j in enumerate(joins)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return [thread.is_alive() for thread in threads]


@pytest.mark.parametrize("count", [2, 3])
def test_every_worker_returns_once_all_have_met(count):
    ports = free_ports(count)
    joins = [ClusterJoin(_tasks(ports), i, poll_seconds=0.05) for i in range(count)]
    still_waiting = _wait_in_threads(joins, start_after={count - 1})
    assert still_waiting == [False] * count
    assert [j.done() for j in joins] == [True] * count
    assert [j.missing() for j in joins] == [[]] * count
    # Every port is free again for TensorFlow's server.
    for port in ports:
        with socket.create_server(("127.0.0.1", port)):
            pass


def test_a_worker_already_inside_tensorflow_counts_as_joined():
    # Its port answers, but not with the rendezvous (TensorFlow's gRPC server sends an
    # HTTP/2 frame and closes): TensorFlow's own checks take it from there.
    own, other = free_ports(2)
    server = socket.create_server(("127.0.0.1", other))

    def answer_like_grpc():
        connection, _ = server.accept()
        with connection:
            connection.recv(256)
            connection.sendall(b"\x00\x00\x18\x04\x00")

    threading.Thread(target=answer_like_grpc, daemon=True).start()
    join = ClusterJoin(_tasks([own, other]), 0, poll_seconds=0.05)
    try:
        assert _wait_in_threads([join]) == [False]
    finally:
        server.close()
    assert join.missing() == []


def test_a_worker_of_another_cluster_on_the_port_is_not_counted():
    ports = free_ports(3)
    ours = ClusterJoin(_tasks(ports[:2]), 1, poll_seconds=0.05)
    # Another cluster whose worker 1 uses our worker 1's port and whose worker 0 never comes.
    theirs = ClusterJoin(_tasks([ports[2], ports[1]]), 0, poll_seconds=0.05)
    waiting = threading.Thread(target=ours.wait, daemon=True)
    waiting.start()
    try:
        theirs._greet(1)  # answered "other"
        assert theirs.missing() == [f"worker 1 at 127.0.0.1:{ports[1]}"]
        assert ours.missing() == [f"worker 0 at 127.0.0.1:{ports[0]}"]
    finally:
        # Worker 0 comes: ours returns.
        assert _wait_in_threads([ClusterJoin(_tasks(ports[:2]), 0, poll_seconds=0.05)]) == [False]
        waiting.join(timeout=30)
    assert not waiting.is_alive() and ours.missing() == []


def test_a_taken_port_leaves_the_wait_to_tensorflow():
    # TensorFlow's server will say that the port is in use; the rendezvous does not hang.
    own, absent = free_ports(2)
    with socket.create_server(("", own)):
        join = ClusterJoin(_tasks([own, absent]), 0, poll_seconds=0.05)
        assert _wait_in_threads([join]) == [False]
    assert join.missing() == [f"worker 1 at 127.0.0.1:{absent}"]

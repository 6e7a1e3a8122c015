"""The chief's lines about a parameter-server worker it lost and got back
(tfaccel.training.distributed.lost_ps_worker), and the steps each worker ran; no TensorFlow cluster."""

import logging

from tfaccel.training.distributed import lost_ps_worker

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

WORKERS = ["10.1.2.3:2222", "10.1.2.4:2222"]
FAILED = "Worker /job:worker/replica:0/task:1 failed with UnavailableError():reset by peer"


def _lose():
    logging.getLogger("tensorflow").error("%s", FAILED)


def test_a_worker_lost_twice_is_said_lost_and_back_twice(monkeypatch):
    said = []
    monkeypatch.setattr(lost_ps_worker, "say", said.append)
    with lost_ps_worker.LostWorkers(WORKERS) as lost:
        first = lost.begin_batch()
        _lose()
        _lose()  # once per closure in flight: said once
        lost.ran(first, [0, 1, 0])  # its steps of the batch it was lost in: not proof
        second = lost.begin_batch()
        lost.ran(second, [0, 0])  # still away: nothing said
        third = lost.begin_batch()
        lost.ran(third, [1, 0, 1])  # a step scheduled after the loss ran on it: back
        fourth = lost.begin_batch()
        _lose()  # lost again, said again
        lost.ran(lost.begin_batch(), [1])
    kinds = [line.split(") is ")[1].split(":")[0] for line in said]
    assert kinds == ["unreachable (TensorFlow", "back", "unreachable (TensorFlow", "back"]
    assert said[1] == lost_ps_worker.rejoined_line(1, WORKERS) == (
        "worker 1 (10.1.2.4:2222, /job:worker/replica:0/task:1) is back: TensorFlow's "
        "coordinator took it again at its address and ran step(s) on it (its share of the "
        "stream continues where its steps left it).")
    assert fourth == 4 and lost.steps == {0: 5, 1: 4}
    assert lost.steps_line() == ("steps run by each worker: worker 0 (10.1.2.3:2222) 5, "
                                 "worker 1 (10.1.2.4:2222) 4")


def test_a_worker_never_lost_is_never_said_back(monkeypatch):
    said = []
    monkeypatch.setattr(lost_ps_worker, "say", said.append)
    lost = lost_ps_worker.LostWorkers(WORKERS)
    lost.ran(lost.begin_batch(), [0, 1])
    lost.ran(lost.begin_batch(), [1])
    assert said == [] and lost.steps == {0: 1, 1: 2}


def test_a_worker_back_is_handed_on(monkeypatch):
    monkeypatch.setattr(lost_ps_worker, "say", lambda line: None)
    back = []
    with lost_ps_worker.LostWorkers(WORKERS, on_back=back.append) as lost:
        batch = lost.begin_batch()
        _lose()
        lost.ran(batch, [1])
        assert back == []  # a step of the batch it was lost in proves nothing
        lost.ran(lost.begin_batch(), [0, 1])
    assert back == [1]

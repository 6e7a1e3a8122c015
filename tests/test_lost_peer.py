"""training/distributed/lost_peer.py: TensorFlow's "peer stopped answering" errors as a message
naming the unreachable HOST:PORT and how to resume (the texts are TF 2.21's own, seen in
tests/test_launch_netns_hosts.py's link cut)."""

from tfaccel.training.distributed.lost_peer import lost_peer_message, unreachable_tasks

CLUSTER = {"worker": ["10.0.0.1:23456", "10.0.0.2:23456"]}
# What the chief (the coordination service's leader) raised when worker 1's link went down.
LEADER_SAW = (
    "Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
    "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\nThe "
    "tasks have crashed. Check the task logs for an earlier error, or scheduler events "
    "(e.g. preemption, eviction) to debug further.")
# What worker 1 raised: its heartbeats to the leader timed out.
WORKER_SAW = ("Collective ops is aborted by: Deadline Exceeded\n\nRPC: "
              "/tensorflow.CoordinationService/Heartbeat\nThe error could be from a previous "
              "operation. Restart your program to reset.")


def test_the_leader_names_the_unhealthy_task_and_a_worker_names_the_leader():
    assert unreachable_tasks(LEADER_SAW, CLUSTER) == [("worker", 1)]
    assert unreachable_tasks(WORKER_SAW, CLUSTER) == [("worker", 0)]
    # With a "chief" job, the chief leads the coordination service.
    with_chief = {"chief": ["10.0.0.9:1"], "worker": ["10.0.0.1:2"]}
    assert unreachable_tasks(WORKER_SAW, with_chief) == [("chief", 0)]
    assert unreachable_tasks("Graph execution error: NaN in the loss", CLUSTER) == []
    assert unreachable_tasks(WORKER_SAW, {}) == []


def test_the_message_names_host_port_the_task_and_how_to_resume():
    text = lost_peer_message(LEADER_SAW, cluster=CLUSTER, finished_epochs=2,
                             kept=" in runs/r")
    assert text.startswith("training failed after 2 finished epoch(s): 10.0.0.2:23456 "
                           "(worker 1, /job:worker/replica:0/task:1) stopped answering")
    assert "no heartbeat for 10 s" in text
    assert "kept in runs/r." in text
    assert "-- train --resume RUN_DIR" in text and "\n" not in text
    worker = lost_peer_message(WORKER_SAW, cluster=CLUSTER, finished_epochs=0, kept="")
    assert "10.0.0.1:23456 (worker 0, /job:worker/replica:0/task:0)" in worker


def test_other_errors_and_tasks_outside_the_cluster_give_no_message():
    assert lost_peer_message("Deadline Exceeded somewhere else", cluster=CLUSTER,
                             finished_epochs=1, kept="") is None
    three = LEADER_SAW.replace("task:1\nThe", "task:7\nThe")
    assert lost_peer_message(three, cluster=CLUSTER, finished_epochs=1, kept="") is None


HEARTBEAT_SCRIPT = '''
import json, os, sys
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["10.0.0.1:2222",
                                                             "10.0.0.2:2222"]},
                                      "task": {"type": "worker", "index": 1}})
from tensorflow.python.eager import context
from tfaccel.engine.strategy import _configure_heartbeat
_configure_heartbeat(float(sys.argv[1]))
config = context.context().coordination_service
print(json.dumps(None if config is None else {
    "timeout_ms": config.heartbeat_timeout_in_ms, "leader": config.service_leader,
    "type": config.service_type,
    "jobs": [(j.name, j.num_tasks) for j in config.coordinated_job_list]}))
'''


def test_peer_timeout_configures_the_service_multi_worker_mirrored_would_configure():
    # In a fresh process (the test process's TensorFlow context is initialised already):
    # runtime.peer_timeout 2.5 gives the standalone service MultiWorkerMirroredStrategy
    # sets up (led by worker 0, over the worker job) with a 2500 ms heartbeat timeout, so
    # the strategy keeps it rather than configuring TensorFlow's default.
    import json
    import subprocess
    import sys

    from launch_helpers import ROOT

    result = subprocess.run([sys.executable, "-c", HEARTBEAT_SCRIPT, "2.5"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "timeout_ms": 2500, "leader": "/job:worker/replica:0/task:0", "type": "standalone",
        "jobs": [["worker", 2]]}


def test_the_message_states_the_configured_timeout():
    text = lost_peer_message(LEADER_SAW, cluster=CLUSTER, finished_epochs=1, kept="",
                             timeout=2.5)
    assert "no heartbeat for 2.5 s" in text

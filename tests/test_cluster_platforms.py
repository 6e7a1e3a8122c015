"""The TF_CONFIG shapes Kubeflow's TFJob and Vertex AI set, read by tfaccel.config.cluster
(TF-free): what each task does, its role, and the refusals that name the culprit."""

import json

import pytest

from tfaccel.config import cluster
from tfaccel.errors import UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

CHIEF_WORKERS = {"chief": ["job-chief-0:2222"],
                 "worker": ["job-worker-0:2222", "job-worker-1:2222"]}
WORKERS_ONLY = {"worker": ["job-worker-0:2222", "job-worker-1:2222", "job-worker-2:2222"]}
WITH_PS = {"chief": ["job-chief-0:2222"], "ps": ["job-ps-0:2222"],
           "worker": ["job-worker-0:2222", "job-worker-1:2222"]}
# TFJob lists the evaluator in the cluster on some versions and leaves it out on others.
WITH_EVALUATOR = {**CHIEF_WORKERS, "evaluator": ["job-evaluator-0:2222"]}


def _set(monkeypatch, cluster_spec, job, index, extra=None):
    config = {"cluster": cluster_spec, "task": {"type": job, "index": index}, **(extra or {})}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))


def _task(monkeypatch, cluster_spec, job, index, extra=None):
    _set(monkeypatch, cluster_spec, job, index, extra)
    task = cluster.cluster_task()
    assert (task.job, task.index) == (job, index)
    return task


def test_no_tf_config_and_one_task_clusters_train_alone(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert cluster.cluster_task().kind == cluster.ALONE
    # Vertex AI sets TF_CONFIG for a one-replica job too: a chief alone.
    assert _task(monkeypatch, {"chief": ["c:1"]}, "chief", 0).kind == cluster.ALONE
    assert cluster.worker_role("auto") == cluster.WorkerRole(0, 1)


@pytest.mark.parametrize("job, index, role_index", [("chief", 0, 0), ("worker", 0, 1),
                                                    ("worker", 1, 2)])
def test_chief_and_workers_train_together_the_chief_first(monkeypatch, job, index,
                                                          role_index):
    task = _task(monkeypatch, CHIEF_WORKERS, job, index)
    assert task.kind == cluster.TRAINING
    assert task.chief_address == "job-chief-0:2222"
    role = cluster.worker_role("auto")
    assert (role.index, role.count, role.chief) == (role_index, 3, role_index == 0)
    cluster.check_strategy_for_cluster(task, "auto")  # no refusal


def test_workers_only_make_worker_0_the_chief(monkeypatch):
    for index in range(3):
        task = _task(monkeypatch, WORKERS_ONLY, "worker", index)
        assert task.kind == cluster.TRAINING and task.chief_address == "job-worker-0:2222"
        assert cluster.worker_role("multi_worker") == cluster.WorkerRole(index, 3)
    assert cluster.tf_config_tasks() == 3


def test_a_ps_cluster_has_one_chief_that_trains_and_tasks_that_serve(monkeypatch):
    chief = _task(monkeypatch, WITH_PS, "chief", 0)
    assert chief.kind == cluster.PARAMETER_SERVER_CHIEF
    cluster.check_strategy_for_cluster(chief, "parameter_server")
    for job, index in [("ps", 0), ("worker", 0), ("worker", 1)]:
        task = _task(monkeypatch, WITH_PS, job, index)
        assert task.kind == cluster.SERVING and task.chief_address == "job-chief-0:2222"
    # Any other strategy would make MultiWorkerMirroredStrategy wait for the ps tasks.
    with pytest.raises(UserInputError, match=r"parameter servers \(1 ps task\(s\)\).*"
                                             r"runtime.strategy is 'auto'"):
        cluster.check_strategy_for_cluster(task, "auto")


@pytest.mark.parametrize("spec", [CHIEF_WORKERS, WITH_EVALUATOR, WITH_PS])
def test_an_evaluator_is_no_training_task_listed_or_not(monkeypatch, spec):
    task = _task(monkeypatch, spec, "evaluator", 0)
    assert task.kind == cluster.EVALUATOR
    # The trainers count the chief and the workers only, whether the evaluator is listed.
    _set(monkeypatch, spec, "chief", 0)
    assert cluster.tf_config_tasks() == 3
    assert [a for _, a in cluster.training_addresses()][0] == "job-chief-0:2222"
    assert "job-evaluator-0:2222" not in dict(cluster.training_addresses()).values()


def test_vertex_ai_fields_are_accepted(monkeypatch):
    # Vertex AI adds `job` (the worker pool specs), `environment: cloud` and the task's
    # `trial` (hyperparameter tuning) and `cloud`; its pools are chief, worker, ps, evaluator.
    extra = {"job": {"worker_pool_specs": [{"machine_spec": {"machine_type": "n1"}}]},
             "environment": "cloud"}
    config = {"cluster": CHIEF_WORKERS, "environment": "cloud", "job": extra["job"],
              "task": {"type": "worker", "index": 1, "trial": "", "cloud": "abc-worker"}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    task = cluster.cluster_task()
    assert (task.kind, task.job, task.index) == (cluster.TRAINING, "worker", 1)
    assert cluster.worker_role("auto") == cluster.WorkerRole(2, 3)
    assert _task(monkeypatch, WITH_PS, "ps", 0, extra).kind == cluster.SERVING
    assert _task(monkeypatch, WITH_EVALUATOR, "evaluator", 0, extra).kind == \
        cluster.EVALUATOR


@pytest.mark.parametrize("config, words", [
    ({"cluster": CHIEF_WORKERS, "task": {"type": "master", "index": 0}},
     "task type 'master' is none of chief, worker, ps, evaluator"),
    ({"cluster": CHIEF_WORKERS, "task": {"type": "worker", "index": 2}},
     "task worker 2; the cluster's worker job has 2 task(s)"),
    ({"cluster": CHIEF_WORKERS, "task": {"type": "worker", "index": "one"}},
     "task index 'one' is not a number"),
    ({"cluster": CHIEF_WORKERS, "task": {"type": "ps", "index": 0}},
     "task ps 0; the cluster's ps job has 0 task(s)"),
    ({"cluster": ["a:1"], "task": {}}, "'cluster' is not an object"),
])
def test_malformed_tasks_are_refused_naming_the_value(monkeypatch, config, words):
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    with pytest.raises(UserInputError) as error:
        cluster.cluster_task()
    assert words in str(error.value)
    assert "TF_CONFIG" in str(error.value)

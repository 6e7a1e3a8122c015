"""Pick and describe a tf.distribute strategy: one device, mirrored devices, or several workers."""


import tensorflow as tf
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context

from tfaccel.config import cluster
from tfaccel.engine.devices import check_devices
from tfaccel.engine.precision import resolve_precision
from tfaccel.engine.ps_cluster import make_parameter_server_strategy
from tfaccel.errors import UserInputError

STRATEGY_KINDS = ("auto", "one_device", "mirrored", "multi_worker", "parameter_server",
                  "pipeline")

# describe_strategy names strategies by the kind that creates them.
_SHORT_NAMES = {
    "OneDeviceStrategy": "one_device",
    "MirroredStrategy": "mirrored",
    "MultiWorkerMirroredStrategy": "multi_worker",
    "CollectiveAllReduceStrategy": "multi_worker",
    "ParameterServerStrategyV2": "parameter_server",
}

# XLA is the recipe's choice on every machine, never the devices': Keras' own
# `jit_compile="auto"` would turn it on wherever a GPU is present; whether it pays there
# depends on the model (benchmarks/device_check.py measures it), and on CPU it measured 3x
# slower for the small CNN.
XLA_CHOICE = "off (training.jit_compile: true compiles the step, on one device)"


def make_strategy(kind="auto", *, devices=None, peer_timeout=None):
    """Create a `tf.distribute.Strategy`.

    Args:
        kind: One of "auto", "one_device", "mirrored", "multi_worker",
            "parameter_server" (TF_CONFIG's chief/ps/worker cluster, run on the chief;
            `tfaccel.engine.ps_cluster`), "pipeline" (TensorFlow's default strategy,
            one replica: `tfaccel.pipeline` places the model's stages on `devices` itself).
            "auto" picks
            MultiWorkerMirroredStrategy when TF_CONFIG names a cluster of more than one
            task, MirroredStrategy when more than one GPU is visible, and TensorFlow's
            default (one device) strategy otherwise.
        devices: Optional device names (e.g. ["/cpu:0", "/cpu:1"]) for "mirrored" (all
            of them) or "one_device" (exactly one); "pipeline" leaves them to the stages.
            Not accepted by "multi_worker", whose devices come from TF_CONFIG, nor by "auto".
        peer_timeout: Seconds without a heartbeat after which TensorFlow's coordination
            service declares a worker of a multi-worker cluster dead (the job then stops);
            None keeps TensorFlow's default (10 s). Ignored without a cluster. For
            "parameter_server": seconds after which a silent worker or parameter server
            fails the chief's calls to it (gRPC keepalive; None: 10 s).

    Returns:
        The strategy. Build and compile the model inside `strategy.scope()`.

    Raises:
        UserInputError: unknown `kind`, `devices` that do not fit `kind`, or devices
            this machine does not have.
    """
    if kind not in STRATEGY_KINDS:
        raise UserInputError(
            f"strategy kind must be one of {', '.join(STRATEGY_KINDS)}; got {kind!r}"
        )
    if devices is not None:
        devices = list(devices)
        if not devices or not all(isinstance(d, str) and d for d in devices):
            raise UserInputError(
                f"devices must be a non-empty list of device names; got {devices!r}"
            )
        if kind in ("auto", "multi_worker", "parameter_server"):
            raise UserInputError(
                f"devices cannot be chosen with strategy kind {kind!r} (got devices={devices!r}); "
                "use kind='mirrored' or 'one_device'"
            )
        check_devices(devices)
    if kind == "pipeline":
        return tf.distribute.get_strategy()
    if kind == "auto":
        kind = _auto_kind()
        if kind == "default":
            # The default strategy places ops the way plain Keras does (GPU:0 when there
            # is one) and adds no distribution machinery at all.
            return tf.distribute.get_strategy()
    if kind == "one_device":
        if devices is not None and len(devices) != 1:
            raise UserInputError(
                f"strategy 'one_device' takes exactly one device; got devices={devices!r}"
            )
        device = devices[0] if devices else _first_device()
        return tf.distribute.OneDeviceStrategy(device)
    if kind == "mirrored":
        return _mirrored(devices)
    if kind == "parameter_server":
        return make_parameter_server_strategy(peer_timeout=peer_timeout)
    if peer_timeout is not None:
        _configure_heartbeat(peer_timeout)
    return tf.distribute.MultiWorkerMirroredStrategy()


def _configure_heartbeat(seconds):
    """Configures the coordination service as MultiWorkerMirroredStrategy would, with a
    heartbeat timeout of `seconds`.

    The strategy configures it only when nothing did before (and then with TensorFlow's
    default timeout): the same standalone service, led by the same task, over the same jobs.
    """
    spec = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec()
    if not spec.jobs or context.context().coordination_service is not None:
        return
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=spec.num_tasks(job))
            for job in cluster.TRAINING_JOBS if job in spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(spec),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=int(round(seconds * 1000)))


def describe_strategy(strategy):
    """Summarise a strategy for logs and summary.json.

    Args:
        strategy: A `tf.distribute.Strategy` (the default strategy included).

    Returns:
        {"strategy": "default" | "one_device" | "mirrored" | "multi_worker" (else the class
        name), "replicas": number in sync, "devices": [device names]}.
    """
    class_name = type(strategy).__name__
    fallback = "default" if class_name.startswith("_Default") else class_name
    name = _SHORT_NAMES.get(class_name, fallback)
    try:
        devices = list(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has no device list: it uses the first device
        devices = [_first_device()]
    except (AttributeError, NotImplementedError):  # parameter servers: the workers' devices
        devices = [str(d) for d in getattr(strategy.extended, "_worker_device", None) or []]
    return {"strategy": name, "replicas": int(strategy.num_replicas_in_sync), "devices": devices}


def auto_choices():
    """What `auto` would pick here, without creating a strategy or touching the policy.

    Cheap: lists physical devices only, so TensorFlow's runtime is not initialised and a
    later logical-device split still works.

    Returns:
        {"devices": {"CPU": n, "GPU": n, "TPU": n}, "gpus": [{"name", "compute_capability"}],
         "strategy": "default" | "mirrored" | "multi_worker", "precision": policy name,
         "xla": `XLA_CHOICE`, "tf_config_tasks": number of tasks in TF_CONFIG (0 when unset)}.
    """
    counts = {kind: len(tf.config.list_physical_devices(kind)) for kind in ("CPU", "GPU", "TPU")}
    return {
        "devices": counts,
        "gpus": _gpu_details(),
        "strategy": _auto_kind(),
        "precision": resolve_precision("auto"),
        "xla": XLA_CHOICE,
        "tf_config_tasks": cluster.tf_config_tasks(),
    }


def _auto_kind():
    if cluster.tf_config_tasks() > 1:
        return "multi_worker"
    if len(tf.config.list_physical_devices("GPU")) > 1:
        return "mirrored"
    return "default"


def _mirrored(devices):
    if devices is None:
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    if all("gpu" not in d.lower() for d in devices):
        # NCCL needs GPUs; on CPU (including logical CPU devices) reduce through one
        # device explicitly instead of letting TF fall back with a warning.
        cross_device_ops = tf.distribute.ReductionToOneDevice()
    else:
        cross_device_ops = None
    return tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=cross_device_ops)


def _first_device():
    gpus = tf.config.list_logical_devices("GPU")
    return (gpus or tf.config.list_logical_devices("CPU"))[0].name


def _gpu_details():
    details = []
    for gpu in tf.config.list_physical_devices("GPU"):
        info = tf.config.experimental.get_device_details(gpu)
        details.append({"name": gpu.name, "compute_capability": info.get("compute_capability")})
    return details

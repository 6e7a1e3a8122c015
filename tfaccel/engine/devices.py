"""Device names checked against the devices this machine has, before a strategy is built."""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from tfaccel.errors import UserInputError

KINDS = ("CPU", "GPU", "TPU")


def local_devices() -> list[str]:
    """The devices a strategy may place work on here, e.g. ``["/cpu:0", "/gpu:0"]``.

    Cheap: reads the visible physical devices and their logical split (a CPU split into two
    logical devices has /cpu:0 and /cpu:1) without initialising TensorFlow's runtime, so a
    later logical-device split or thread setting still works.
    """
    names = []
    for kind in KINDS:
        index = 0
        for device in tf.config.get_visible_devices(kind):
            logical = tf.config.get_logical_device_configuration(device) or [None]
            for _ in logical:
                names.append(f"/{kind.lower()}:{index}")
                index += 1
    return names


def check_devices(devices: Optional[Sequence[str]], *, key: str = "devices") -> None:
    """Refuses device names this machine does not have, naming the ones it has.

    A strategy given a device that is not there does not fail: MirroredStrategy on absent
    GPUs placed its replicas on the CPU and then waited forever for a collective that never
    completed (Ctrl-C and SIGTERM went unanswered); pipeline stages ran on the CPU while the
    run said ``stage 0 on /gpu:0``. So the names are checked before anything is built.

    Args:
        devices: Device names as TensorFlow spells them (``/gpu:0``, ``GPU:1``,
            ``/device:CPU:0``, ``/job:localhost/replica:0/task:0/device:CPU:1``); None or
            empty checks nothing. A name of another job than this process's is not
            checked here (its machine is another one).
        key: How the caller names the setting in the message (``runtime.devices``).

    Raises:
        UserInputError: A name that is not a device name, or a device this machine lacks.
    """
    if not devices:
        return
    present = local_devices()
    missing = []
    for name in devices:
        try:
            spec = tf.DeviceSpec.from_string(str(name))
        except ValueError:
            spec = None
        if spec is None or spec.device_type is None:
            raise UserInputError(
                f"{key}: {name!r} is not a device name; name devices as TensorFlow does, "
                f"e.g. /gpu:0 or /cpu:1 (this machine has {', '.join(present)}).")
        if spec.job not in (None, "localhost"):
            continue
        wanted = f"/{spec.device_type.lower()}:{spec.device_index or 0}"
        if wanted not in present:
            missing.append(str(name))
    if missing:
        kinds = {d.split(":")[0][1:].upper() for d in present}
        lacking = sorted({tf.DeviceSpec.from_string(m).device_type.upper() for m in missing}
                         - kinds)
        none_of = (f" (TensorFlow sees no {' and no '.join(lacking)} here)"
                   if lacking else "")
        raise UserInputError(
            f"{key} names {', '.join(missing)}, which this machine does not have{none_of}; "
            f"the devices here are {', '.join(present)}. Name devices from that list, or "
            f"leave {key} empty to use every device of the strategy's kind (`tfaccel "
            "devices` lists them).")

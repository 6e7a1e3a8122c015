"""Split a functional or Sequential Keras model into pipeline stages, each placed on its device."""

import dataclasses

import keras
import tensorflow as tf
from keras.src.models.functional import Functional

from tfaccel.engine.devices import check_devices
from tfaccel.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class Stage:
    """One pipeline stage: a functional sub-model sharing the placed model's layers.

    Attributes:
        index: Position of the stage, 0 first.
        device: The device that holds its variables and runs its computation.
        model: A functional `keras.Model` from the previous stage's output (the model's
            inputs for stage 0) to its last layer's output (the model's outputs last).
        layers: Names of its layers, in order.
        parameters: Its weights' element count, trainable and not.
    """

    index: int
    device: str
    model: keras.Model
    layers: tuple
    parameters: int

    def describe(self):
        """The stage for a summary: ``{"stage", "device", "layers", "parameters"}``."""
        return {"stage": self.index, "device": self.device, "layers": list(self.layers),
                "parameters": self.parameters}


def pipeline_devices(devices=None):
    """The devices stages go to: `devices` as given, else every GPU, else every logical CPU.

    Args:
        devices: Optional device names, e.g. ["/gpu:0", "/gpu:1"].

    Returns:
        A list of device names.

    Raises:
        UserInputError: A device this machine does not have.
    """
    if devices:
        check_devices(devices)
        return list(devices)
    found = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return [d.name for d in found]


def split_model(model, *, split_at=None, stages=None, devices=None):
    """A copy of `model` with each stage's variables on its device, and its stages.

    The copy is rebuilt layer by layer (`keras.models.clone_model`), each layer built
    under `tf.device` of its stage, so that its variables are created there (Keras 3
    creates a layer's variables in `build`, on the device in scope), and given the
    model's weights. A Sequential model comes back as a functional one with the same
    layers.

    Args:
        model: A built functional or Sequential `keras.Model`.
        split_at: Names of the layers that END a stage (all stages but the last); the
            graph must narrow to that layer's one output there (no skip connection over it).
        stages: Instead of `split_at`, a number of stages balanced by parameter count.
        devices: Device names; stage i goes to devices[i % len(devices)]. Default: every
            GPU, else every logical CPU.

    Returns:
        ``(placed_model, [Stage, ...])``.

    Raises:
        UserInputError: a subclassed or unbuilt model, both or neither of `split_at` and
            `stages` chosen, an unknown layer name, or a split a tensor crosses besides
            the split layer's output.
    """
    functional = _as_functional(model)
    devices = pipeline_devices(devices)
    layers = [layer for layer in functional.layers if not isinstance(layer, keras.layers.InputLayer)]
    if split_at is not None and stages is not None:
        raise UserInputError(
            f"choose the pipeline's stages by split_at ({list(split_at)!r}) or by stages "
            f"({stages!r}), not both")
    if split_at is None:
        count = len(devices) if stages is None else stages
        ends = _balanced_ends(functional, layers, count)
    else:
        ends = _named_ends(functional, layers, list(split_at))
    stage_of = {}
    start = 0
    for index, end in enumerate([*ends, len(layers) - 1]):
        for layer in layers[start:end + 1]:
            stage_of[layer.name] = index
        start = end + 1
    device_of = {name: devices[stage % len(devices)] for name, stage in stage_of.items()}
    placed = _placed_copy(functional, device_of)
    placed_layers = {layer.name: layer for layer in placed.layers}
    boundaries = [placed.inputs, *(placed_layers[layers[e].name].output for e in ends),
                  placed.outputs]
    result = []
    start = 0
    for index, end in enumerate([*ends, len(layers) - 1]):
        names = tuple(layer.name for layer in layers[start:end + 1])
        sub = keras.Model(boundaries[index], boundaries[index + 1],
                          name=f"{model.name}_stage{index}")
        parameters = sum(int(w.numpy().size) for n in names for w in placed_layers[n].weights)
        result.append(Stage(index=index, device=devices[index % len(devices)], model=sub,
                            layers=names, parameters=parameters))
        start = end + 1
    return placed, result


def _as_functional(model):
    if not isinstance(model, keras.Model):
        raise UserInputError(f"model must be a keras.Model; got {type(model).__name__}")
    if isinstance(model, keras.Sequential):
        if not model.built or not getattr(model, "_functional", None):
            raise UserInputError(
                f"Sequential model {model.name!r} has no input shape yet; start it with "
                "keras.Input(shape) (or build it) before splitting it into pipeline stages")
        return keras.Model(model.inputs, model.outputs, name=model.name)
    if type(model).__name__ != "Functional" and not _is_functional(model):
        raise UserInputError(
            f"model {model.name!r} is a subclassed keras.Model ({type(model).__name__}); a "
            "pipeline splits the layer graph of a functional or Sequential model, which a "
            "subclassed model's call() does not expose. Write it with the functional API "
            "(keras.Model(inputs, outputs)) or keras.Sequential, or train it with "
            "runtime.strategy one_device or mirrored")
    return model


def _is_functional(model):
    # A subclass of Functional made by keras.Model(inputs, outputs) is functional too;
    # `keras.Model.__new__` returns a Functional for that call.
    return isinstance(model, Functional) and type(model).call is Functional.call


def _named_ends(functional, layers, split_at):
    index = {layer.name: i for i, layer in enumerate(layers)}
    ends = []
    for name in split_at:
        if name not in index:
            raise UserInputError(
                f"runtime.pipeline.split_at names layer {name!r}, which model "
                f"{functional.name!r} does not have; its layers: "
                f"{', '.join(layer.name for layer in layers)}")
        if index[name] == len(layers) - 1:
            raise UserInputError(
                f"runtime.pipeline.split_at names {name!r}, the model's last layer: a stage "
                "ends at each named layer and the last stage needs at least one layer")
        reason = _cut_problem(functional, layers[index[name]])
        if reason:
            raise UserInputError(f"runtime.pipeline.split_at cannot split at {name!r}: {reason}")
        ends.append(index[name])
    if ends != sorted(set(ends)):
        raise UserInputError(
            f"runtime.pipeline.split_at must name distinct layers in the model's order; got "
            f"{split_at!r}")
    return ends


def _balanced_ends(functional, layers, count):
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UserInputError(f"runtime.pipeline.stages must be an integer >= 1; got {count!r}")
    sizes = [sum(int(w.numpy().size) for w in layer.weights) for layer in layers]
    cumulative = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    candidates = [i for i in range(len(layers) - 1) if not _cut_problem(functional, layers[i])]
    if len(candidates) < count - 1:
        raise UserInputError(
            f"runtime.pipeline.stages is {count} but model {functional.name!r} can be cut "
            f"at only {len(candidates)} layer(s) where its graph narrows to one tensor; "
            f"use at most {len(candidates) + 1} stages")
    ends = []
    total = cumulative[-1]
    for k in range(1, count):
        # The cut whose parameters before it come nearest k/count of the total; cuts stay
        # in order and leave enough cuts for the stages still to place.
        left = [i for i in candidates if (not ends or i > ends[-1])]
        left = left[:len(left) - (count - 1 - k)]
        ends.append(min(left, key=lambda i: (abs(cumulative[i] - total * k / count), i)))
    return ends


def _cut_problem(functional, layer):
    """Why the model cannot be cut after `layer` (None when it can)."""
    # Node 0 is the layer's call in the model (building a sub-model from an inner tensor
    # adds nodes of its own after it).
    outputs = layer._inbound_nodes[0].output_tensors if layer._inbound_nodes else []
    if len(outputs) != 1:
        return "the layer has several outputs; split where the graph narrows to one tensor"
    try:
        before = keras.Model(functional.inputs, outputs[0])
        after = keras.Model(outputs[0], functional.outputs)
    except ValueError:
        return ("a tensor besides that layer's output crosses the cut (a skip or residual "
                "connection); split where the graph narrows to one tensor")
    covered = {id(x) for x in before.layers} | {id(x) for x in after.layers}
    if any(id(x) not in covered for x in functional.layers):
        return "a tensor besides that layer's output crosses the cut"
    return None


def _placed_copy(functional, device_of):
    def clone(layer):
        # Layers that make variables or seed generators in __init__ (Dropout's seed)
        # place them here; the rest in build, inside `call` below.
        with tf.device(device_of.get(layer.name)):
            return layer.__class__.from_config(layer.get_config())

    def call(layer, *args, **kwargs):
        with tf.device(device_of.get(layer.name)):
            return layer(*args, **kwargs)

    placed = keras.models.clone_model(functional, clone_function=clone, call_function=call)
    # Every variable, the seed generators' states included (Dropout's): the copy draws the
    # same masks as the model would have. Assigning keeps each variable on its device.
    for source, target in zip(functional.variables, placed.variables, strict=True):
        target.assign(source.value)
    return placed

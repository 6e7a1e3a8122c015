"""LiteRT (.tflite): the converter, its int8 checks, stripping, the size breakdown, the interpreter."""

from __future__ import annotations

from pathlib import Path

from tfaccel.errors import UserInputError
from tfaccel.tools.export.format_runtime import RUNTIME_THREADS, Runtime, first_lines, size_on_disk

# Full-integer LiteRT ops that may stay float: the input QUANTIZE and the output DEQUANTIZE.
_BOUNDARY_OPS = ("QUANTIZE", "DEQUANTIZE")
# LiteRT ops that hold a layer's weights: one left in float32 means the layer is not int8.
_WEIGHTED_OPS = frozenset({
    "CONV_2D", "CONV_3D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D_TRANSPOSE",
    "FULLY_CONNECTED", "BATCH_MATMUL", "EMBEDDING_LOOKUP", "LSTM", "SVDF",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN"})


def convert(model, artifact: Path, *, quantize: str, calibration,
            per_tensor: bool = False, strip: bool = False) -> dict:
    """Writes `model` as a .tflite with the LiteRT converter; returns the int8 details."""
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    import tensorflow as tf

    options = {}
    if strip:
        options["exclude_conversion_metadata"] = True  # converter version and options
    if quantize != "none":
        options["optimizations"] = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        options["target_spec"] = {"supported_types": [tf.float16]}
    if quantize == "int8":
        def representative_dataset():
            for example in calibration:
                yield [example[None]]

        options["representative_dataset"] = representative_dataset
        # Integer kernels only; float input and output keep the model's interface.
        options["target_spec"] = {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]}
    try:
        if quantize == "int8":
            kept_float = _export_litert_int8(model, artifact, options=options,
                                             per_tensor=per_tensor)
        else:
            model.export(str(artifact), format="litert", verbose=False, **options)
    except Exception as error:  # the converter's own message names the op it rejects
        if quantize == "none":
            raise
        raise UserInputError(f"the LiteRT converter cannot apply --quantize {quantize} to "
                             f"this model: {first_lines(error)}") from None
    details = {}
    if quantize == "int8":
        details = _check_int8_litert(artifact)  # reads tensor names: before any strip
        details["float_preprocessing_ops"] = [f"{op} ({tensor})" for op, tensor in kept_float]
    if strip:
        strip_litert_strings(artifact)
    return details


def _export_litert_int8(model, artifact: Path, *, options: dict, per_tensor: bool) -> list:
    """Writes an int8 .tflite: every layer with weights int8, the input preprocessing float32.

    The converter's own two steps, split to pass one argument between them: calibration
    (Keras' LiteRT export with the converter's ``_experimental_calibrate_only``, as LiteRT's
    QuantizationDebugger runs it), then ``mlir_quantize`` with the ops of
    `input_preprocessing_ops` denylisted (LiteRT's selective quantization).

    Returns:
        (op name, output tensor name) of each op left in float32 on purpose.
    """
    # The function the converter (and its QuantizationDebugger) quantizes with; the
    # converter has no attribute that passes a denylist to it.
    from tensorflow.lite.python.convert import mlir_quantize

    model.export(str(artifact), format="litert", verbose=False,
                 _experimental_calibrate_only=True, **options)
    calibrated = artifact.read_bytes()
    kept_float = input_preprocessing_ops(artifact)
    # Quantized, the raw pixels and the per-image standardisation cost 5.80 accuracy points
    # on the default recipe trained 3 epochs (README, Export): int8 steps of about one grey
    # level on the input, and one scale for every image's variance and 1/sqrt, erase a
    # low-contrast image. In float32 they are a few ops on one image.
    artifact.write_bytes(mlir_quantize(
        calibrated, disable_per_channel=per_tensor,
        denylisted_nodes=[tensor for _, tensor in kept_float] or None))
    return kept_float


def input_preprocessing_ops(path: Path) -> list:
    """(op name, output tensor name) of the ops of a float .tflite that precede its weights.

    These are the ops computed from the model's input alone, before any layer with weights
    (tfaccel's models: the 1/255 rescaling and the per-image standardisation, the layers
    `split_preprocessing` moves out); the rest of the graph depends on a weighted op. A
    graph whose output needs no weighted op has no such prefix: the list is empty.
    """
    interpreter = load_litert_interpreter(path)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    operations = interpreter._get_ops_details()  # in execution (topological) order
    produced = {index for op in operations for index in op["outputs"]}
    from_input = {detail["index"] for detail in interpreter.get_input_details()}
    found = []
    for op in operations:
        # Constants are neither produced by an op nor an input; every other input must
        # come from the input through the prefix.
        computed = [index for index in op["inputs"] if index in produced or index in
                    from_input]
        if (op["op_name"] in _WEIGHTED_OPS or not computed
                or not all(index in from_input for index in computed)):
            continue
        from_input.update(op["outputs"])
        # The converter names an op by its (first) output tensor; the denylist matches that.
        found.append((op["op_name"], names[op["outputs"][0]]))
    outputs = {detail["index"] for detail in interpreter.get_output_details()}
    return [] if outputs & from_input else found


def strip_litert_strings(path: Path) -> None:
    """Rewrites a .tflite without tensor names, subgraph names and signatures.

    The LiteRT tools' ``flatbuffer_utils.strip_strings`` (what its strip_strings tool runs),
    from TensorFlow's copy of those tools, which `litert_size_breakdown` reads with too;
    operators, weights and quantization parameters are untouched.
    """
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(path))
    flatbuffer_utils.strip_strings(model)
    flatbuffer_utils.write_model(model, str(path))


def _check_int8_litert(artifact: Path) -> dict:
    """Float ops left in a full-integer .tflite: reported, or refused if they hold weights."""
    float_ops = float_operations(artifact)
    # The converter leaves an op without an int8 kernel in float (between DEQUANTIZE and
    # QUANTIZE) without an error, even with TFLITE_BUILTINS_INT8 only. A float op without
    # weights is reported (the input preprocessing is float32 on purpose; a small float
    # island is how LiteRT runs an op it cannot quantize). A layer with weights left in
    # float32 is not an int8 model: refused.
    weighted = [(op, tensor) for op, tensor in float_ops if op in _WEIGHTED_OPS]
    if weighted:
        shown = "; ".join(f"{op} ({tensor})" for op, tensor in weighted[:5])
        raise UserInputError(
            "--quantize int8: the LiteRT converter cannot quantize these layers, which would "
            f"stay float32: {shown}. Replace those layers, or use --quantize dynamic or "
            "float16.")
    return {"integer_only": not float_ops,
            "float_ops": [f"{op} ({tensor})" for op, tensor in float_ops]}


def float_operations(path: Path) -> list:
    """(op name, output tensor name) of every op of a .tflite that computes in float.

    The model's input QUANTIZE and output DEQUANTIZE are allowed.
    """
    interpreter = load_litert_interpreter(path)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    found = []
    # `_get_ops_details` is the interpreter's op listing (used by LiteRT's own analyzer
    # tools); the public API lists tensors only.
    for op in interpreter._get_ops_details():
        if op["op_name"] in _BOUNDARY_OPS:
            continue
        for index in op["outputs"]:
            tensor = tensors.get(index)
            if tensor is not None and str(tensor["dtype"].__name__).startswith("float"):
                found.append((op["op_name"], tensor["name"]))
                break
    return found


def litert_size_breakdown(path: Path) -> dict:
    """Bytes of a .tflite by kind; the values add up to the file's size.

    Keys: ``constants_<dtype>`` (weight, bias and other constant buffers, by the dtype of
    the tensor that holds them), ``metadata`` (metadata buffers, e.g. the converter's
    CONVERSION_METADATA), ``quantization_parameters`` (a float32 scale and an int64 zero
    point per tensor, or per output channel), ``tensor_names``, and ``structure``: the rest
    (the flatbuffer's tables, offsets, shapes, operators, signatures, alignment padding).
    """
    # TensorFlow's own flatbuffer reader (tensorflow/lite/tools), as the LiteRT tools use.
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(str(path))
    dtypes = {value: name.lower() for name, value in vars(schema.TensorType).items()
              if not name.startswith("_")}
    counts: dict = {}
    seen = set()

    def add(key, n):
        counts[key] = counts.get(key, 0) + int(n)

    for metadata in model.metadata or ():
        seen.add(metadata.buffer)
        add("metadata", _buffer_size(model.buffers[metadata.buffer]))
    for subgraph in model.subgraphs:
        for tensor in subgraph.tensors:
            if tensor.buffer not in seen:
                seen.add(tensor.buffer)
                size = _buffer_size(model.buffers[tensor.buffer])
                if size:
                    add(f"constants_{dtypes.get(tensor.type, tensor.type)}", size)
            quantization = tensor.quantization
            if quantization is not None:
                add("quantization_parameters", sum(
                    width * (0 if values is None else len(values)) for width, values in (
                        (4, quantization.scale), (8, quantization.zeroPoint),
                        (4, quantization.min), (4, quantization.max))))
            add("tensor_names", len(tensor.name or b""))
    counts["structure"] = size_on_disk(Path(path)) - sum(counts.values())
    return counts


def _buffer_size(buffer) -> int:
    return 0 if buffer.data is None else len(buffer.data)


def load_litert_interpreter(path: Path, *, num_threads: int = 1):
    """The LiteRT interpreter of the ai-edge-litert package (tf.lite's is deprecated)."""
    # Deferred: ai-edge-litert (the export extra); tools/export imports TF-free.
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path), num_threads=num_threads)


def load_runtime(path: Path) -> Runtime:
    """Loads a .tflite with the LiteRT interpreter (int8 input and output scaled)."""
    # Deferred: numpy (~0.1 s); tools/export imports TF-free.
    import numpy as np

    interpreter = load_litert_interpreter(path, num_threads=RUNTIME_THREADS["litert"])
    source = interpreter.get_input_details()[0]
    target = interpreter.get_output_details()[0]
    state = {"shape": None}

    def predict(x):
        # The whole shape: a sequence model's length is open too (shape_signature -1).
        if state["shape"] != x.shape:
            interpreter.resize_tensor_input(source["index"], list(x.shape))
            interpreter.allocate_tensors()
            state["shape"] = x.shape
        value = x
        scale, zero_point = source["quantization"]
        if np.issubdtype(source["dtype"], np.integer) and scale:
            value = np.round(x / scale + zero_point)
        interpreter.set_tensor(source["index"], value.astype(source["dtype"]))
        interpreter.invoke()
        output = interpreter.get_tensor(target["index"])
        scale, zero_point = target["quantization"]
        if np.issubdtype(target["dtype"], np.integer) and scale:
            output = (output.astype("float32") - zero_point) * scale
        return output

    return Runtime(predict)

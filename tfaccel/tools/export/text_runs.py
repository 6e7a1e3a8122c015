"""What the export of a text run (a model taking raw strings) is and supports."""

from __future__ import annotations

from pathlib import Path

from tfaccel.errors import UserInputError, did_you_mean
from tfaccel.training.run_dir import run_files


def is_text_run(directory: Path) -> bool:
    """Whether a run trained on texts: it kept the vocabulary its model's ids come from."""
    # Deferred: TensorFlow (seconds); tools/export imports TF-free.
    from tfaccel.data.text_vectors import VOCABULARY_FILE

    return (Path(directory) / VOCABULARY_FILE).is_file()


def text_tokenizer(directory: Path) -> str:
    """A text run's data.text.tokenizer, from its recipe.yaml.

    Raises:
        RecipeError: The recipe does not load here (a wordpiece run without KerasHub
            installed is named with how to install it).
    """
    # Deferred: the recipe layer (yaml); tools/export imports TF-free.
    from tfaccel.config.recipe import load_recipe

    return load_recipe(Path(directory) / run_files.RECIPE_FILE).data.text.tokenizer


# What turns a text run's strings into ids, by data.text.tokenizer (for messages).
_TOKENIZER_NAMES = {"text_vectorization": "Keras' TextVectorization",
                    "wordpiece": "a KerasHub WordPieceTokenizer"}
_TOKENIZER_OPS = {"text_vectorization": "string splitting and a vocabulary lookup table",
                  "wordpiece": "TensorFlow Text's FastWordpieceTokenizer op"}


def check_text_export(*, format: str, quantize: str, preprocessing: str,
                      tokenizer: str = "text_vectorization") -> None:
    """What the export of a text run (a model taking raw strings) supports.

    Args:
        format: The export format.
        quantize: The quantization mode.
        preprocessing: Where the preprocessing goes (``inside`` or ``outside``).
        tokenizer: The run's data.text.tokenizer (``text_vectorization`` or ``wordpiece``).

    Raises:
        UserInputError: A format, quantization or preprocessing placement it does not.
    """
    name = _TOKENIZER_NAMES.get(tokenizer)
    if name is None:
        raise UserInputError(f"tokenizer must be one of {', '.join(_TOKENIZER_NAMES)}, got "
                             f"{tokenizer!r}{did_you_mean(str(tokenizer), _TOKENIZER_NAMES)}.")
    if format in ("litert", "onnx"):
        raise UserInputError(
            f"--format {format} cannot export a text run: its exported model takes raw "
            f"strings through {name} ({_TOKENIZER_OPS[tokenizer]}), which the "
            f"{'LiteRT' if format == 'litert' else 'ONNX'} converter does not convert. Use "
            "--format saved_model or --format keras (both take raw strings).")
    if quantize != "none":
        raise UserInputError(
            f"--quantize {quantize} is not supported for a text run yet (Keras cannot "
            f"quantize the tokenizer in front of the model, {name}, and a quantized "
            "MultiHeadAttention does not load back from a .keras file); use --quantize none.")
    if preprocessing == "outside":
        raise UserInputError(
            "--preprocessing outside does not apply to a text run: its preprocessing is the "
            "vocabulary lookup (vocabulary.txt in the run directory), kept inside the export "
            "so that it takes raw strings; use --preprocessing inside.")

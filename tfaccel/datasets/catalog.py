"""The built-in datasets' names, classes and sizes (TensorFlow-free: validate reads them)."""

NAME = "tfaccel_shapes"
CLASS_NAMES = ("circle", "square", "triangle", "cross")
NUM_CLASSES = len(CLASS_NAMES)
IMAGE_SHAPE = (32, 32, 3)
SPLIT_SIZES = {"train": 12_000, "test": 2_000}

# The built-in text dataset: short texts of 10 to 300 words (most near 30) whose words hint
# at one of four topics; prepared like tfaccel_shapes (tfaccel.datasets.phrases).
TEXT_NAME = "tfaccel_phrases"
TEXT_CLASS_NAMES = ("sports", "weather", "cooking", "travel")
TEXT_SPLIT_SIZES = {"train": 8_000, "test": 1_000}

# Every built-in dataset's name.
BUILTIN = (NAME, TEXT_NAME)

"""A folder of images, one sub-folder per class, as a batched tf.data pipeline."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfaccel.data import crops, images, jpeg_headers, tail
from tfaccel.data.sources import base, class_folder
from tfaccel.data.sources.class_folder import Listing
from tfaccel.errors import UserInputError

logger = logging.getLogger(__name__)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")
# The default shuffle buffer after a cache: decoded images, so capped (memory). The folder's
# one seeded permutation (data.order) is what mixes the classes, whatever the buffer.
_CACHED_SHUFFLE_CAP = 10_000


_HEAD = 4096  # first bytes read of each file: the magic bytes and, mostly, a JPEG's header


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG = "png:"  # a listed PNG's size text starts with it; a JPEG's has no prefix


@functools.lru_cache(maxsize=1024)
def _size_text(height: int, width: int, prefix: str = "") -> str:
    """``"HEIGHTxWIDTH"`` (a JPEG's) or ``"png:HEIGHTxWIDTH"``, one string object per size.

    A million checked files of a few sizes then share a few strings, not a million (~54 MB).
    """
    return f"{prefix}{height}x{width}"


def _png_size(head: bytes) -> Optional[Tuple[int, int]]:
    """``(height, width)`` from a PNG's IHDR chunk, or None when `head` does not hold one.

    IHDR is the first chunk by the format: length and type at bytes 8-15, then width and
    height as big-endian uint32. Any bit depth or colour type decodes to the channels asked
    for at this size (`images.decode_image` converts), so the size is all the plan needs.
    """
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    return (height, width) if height and width else None


def _listed_size(result) -> Tuple[Optional[str], Optional[Tuple[int, int]]]:
    """``(format, (height, width))`` of a listing result: ``("jpeg", ...)``,
    ``("png", ...)``, or ``(None, None)`` when its size is not known (True, False)."""
    if not isinstance(result, str):
        return None, None
    if result.startswith(_PNG):
        return "png", tuple(map(int, result[len(_PNG):].split("x")))
    return "jpeg", tuple(map(int, result.split("x")))


def _usable_results(listing: Listing) -> set:
    """The distinct check results of a checked listing's usable files: a few size texts
    (and True for a usable file of unknown size), whatever the folder's length."""
    return {r for r in listing.results if r is not False}


def _inspect(path: str):
    """A listed image's check and size in one open: False, True, ``"HEIGHTxWIDTH"`` or
    ``"png:HEIGHTxWIDTH"``.

    False: not a whole JPEG/PNG/GIF/BMP (by its magic bytes and its ending); True: usable,
    not a JPEG or PNG of known size; ``"480x640"``: a whole JPEG, its size from the frame
    header (`jpeg_headers`), which plans its decode; ``"png:480x640"``: a whole PNG, its
    size from its IHDR chunk (`_png_size`), which lets a one-size folder resize a batch at
    a time (a string: one small object per file, in memory and in the saved listing).
    Reads at most 5 KiB of a file (its
    first `_HEAD` bytes and last KiB), with os-level calls (no file object): checking 100k
    files costs about a second, not an epoch of decoding. It catches the common
    corruptions (a non-image renamed to .jpg, a zero-byte file, a download cut short);
    anything subtler stops the epoch at decode time, as in Keras' loader (named, on a
    listing left to the decode: `_named_decode`).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        size = os.fstat(descriptor).st_size
        head = os.pread(descriptor, _HEAD, 0)
        tail = (head[max(0, size - 1024):] if size <= len(head)
                else os.pread(descriptor, 1024, size - 1024))
    except OSError:
        return False
    finally:
        os.close(descriptor)
    if head.startswith(b"\xff\xd8\xff"):
        # JPEG: entropy-coded data byte-stuffs 0xFF, so an end-of-image marker near the end
        # means the file was not cut short.
        if b"\xff\xd9" not in tail:
            return False
        shape = jpeg_headers.jpeg_size_in(head, path)
        return True if shape is None else _size_text(*shape)
    if head.startswith(_PNG_SIGNATURE):
        if b"IEND" not in tail[-16:]:
            return False
        shape = _png_size(head)
        return True if shape is None else _size_text(*shape, _PNG)
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return tail.endswith(b"\x3b") or tail.rstrip(b"\x00").endswith(b"\x3b")
    if head[:2] == b"BM" and len(head) >= 6:
        # BMP stores its own file size in bytes 2..5.
        return int.from_bytes(head[2:6], "little") <= size
    return False


def _is_whole_image(data):
    """`_inspect`'s check (False or not) of a file's bytes, in the graph: a bool tensor."""
    size = tf.strings.length(data)
    tail = tf.io.decode_raw(tf.strings.substr(data, tf.maximum(size - 1024, 0), 1024),
                            tf.uint8)

    def starts(magic: bytes):
        return tf.equal(tf.strings.substr(data, 0, len(magic)), magic)

    def holds(window, pattern: bytes):
        n = len(pattern)
        found = tf.ones_like(window[n - 1:], tf.bool)
        for i, byte in enumerate(pattern):
            found &= tf.equal(window[i:tf.size(window) - (n - 1 - i)], byte)
        return tf.reduce_any(found)

    positions = tf.range(tf.size(tail))
    last = tf.reduce_max(tf.where(tf.not_equal(tail, 0), positions, -1))  # past the padding
    padded_tail = tf.concat([tail, tf.zeros([1], tf.uint8)], 0)  # an empty file has none
    gif_end = (last >= 0) & tf.equal(tf.gather(padded_tail, tf.maximum(last, 0)), 0x3B)
    # A BMP's own file size, bytes 2..5 little-endian (zero-padded when the file is shorter).
    stored = tf.cast(tf.io.decode_raw(tf.strings.substr(
        tf.strings.join([data, b"\0" * 6]), 2, 4), tf.uint8), tf.int64)
    bmp_size = tf.reduce_sum(stored * tf.constant([1, 1 << 8, 1 << 16, 1 << 24], tf.int64))
    return tf.reduce_any(tf.stack([
        starts(b"\xff\xd8\xff") & holds(tail, b"\xff\xd9"),
        starts(_PNG_SIGNATURE) & holds(tail[-16:], b"IEND"),
        (starts(b"GIF87a") | starts(b"GIF89a")) & gif_end,
        starts(b"BM") & (size >= 6) & (bmp_size <= tf.cast(size, tf.int64))]))


def read_checked(path):
    """The bytes of the image file at `path`; an error naming it when it is not a whole image.

    The decode-time form of the listing's check (`_inspect`, for a listing that left it
    to the decode: `Listing.deferred`). The error is tf.data's, and its message carries
    ``DataError: <text>``, which a training run reports as a `DataError` (exit 2).
    """
    data = tf.io.read_file(path)
    message = tf.strings.join([
        "DataError: Image file ", path, " is not a whole JPEG, PNG, GIF or BMP image (not "
        "an image, empty, or cut short): remove or replace it. (A big folder's first run "
        "checks each file as it decodes it; once the folder's listing is saved, runs skip "
        "such files with a warning.)"])
    with tf.control_dependencies([tf.debugging.Assert(_is_whole_image(data), [message])]):
        return tf.identity(data)


IMAGE_KIND = class_folder.Kind(
    extensions=IMAGE_EXTENSIONS, noun="images", files="image files", folder="Image folder",
    usable="/".join(e[1:] for e in IMAGE_EXTENSIONS) + " image", check=_inspect,
    saved_as="image check and JPEG/PNG size, v3")


# From this many images, a folder with no saved listing (a cold run) is not checked before
# training: opening every file made a cold 100k-file build ~2.4x slower to its first batch
# than Keras' listing (docs/performance.md); the decode checks each file as it reads it.
DEFER_CHECK_FROM = 10_000


def list_image_folder(path: str, *, verify: bool = True,
                      class_names: Optional[Sequence[str]] = None, follow_links: bool = True,
                      labels: Union[str, Sequence[int], None] = "inferred") -> Listing:
    """Lists the images of a class-per-sub-folder tree, skipping what cannot be an image.

    `class_folder.list_class_folder` with image files, each checked by `_inspect` when
    `verify` (see there for the arguments, the result and the errors); the listing's
    `results` hold each JPEG's size, and are reused by the next run for unchanged files.
    A folder of `DEFER_CHECK_FROM` images or more without saved results is checked in a
    background thread instead (``Listing.deferred``): its decode checks each file.
    """
    return class_folder.list_class_folder(path, kind=IMAGE_KIND, verify=verify,
                                          class_names=class_names,
                                          follow_links=follow_links, labels=labels,
                                          defer_from=DEFER_CHECK_FROM)



def decode_image_for_size(data, channels: int, image_size: Tuple[int, int], *,
                          crop_to_aspect_ratio: bool = False):
    """Decodes like `decode_image`, but a JPEG at most half the target size is decoded small.

    libjpeg can decode at 1/2, 1/4 or 1/8 scale straight from the DCT coefficients, skipping
    most of the inverse transform and the colour conversion: `tf.io.decode_jpeg(ratio=r)`.
    The largest r that still leaves at least `image_size` pixels in both sides (after the
    aspect-ratio crop, if any) is chosen from the header (`tf.io.extract_jpeg_shape`, no
    decoding); the caller then resizes from there. Other formats, and 4 channels, take the
    ordinary path.
    """
    if channels not in (1, 3):
        return images.decode_image(data, channels)
    height, width = (int(v) for v in image_size)

    def jpeg():
        shape = tf.io.extract_jpeg_shape(data)
        h, w = shape[0], shape[1]
        if crop_to_aspect_ratio:  # the region that will be kept
            h, w = (tf.minimum(h, w * height // width), tf.minimum(w, h * width // height))
        # Plan indices are 1 + the position in RATIOS (0 is the generic decode).
        return _decode_planned(data, 1 + crops.dct_scale_index(h, w, image_size), channels)

    is_jpeg = tf.equal(tf.strings.substr(data, 0, 3), b"\xff\xd8\xff")
    image = tf.cond(is_jpeg, jpeg, lambda: images.decode_image(data, channels))
    image.set_shape([None, None, channels])
    return image


def _decode_planned(data, index, channels: int):
    """Decodes with a plan index from `jpeg_headers` (a Python int or a scalar tensor)."""
    def jpeg(ratio):
        image = tf.io.decode_jpeg(data, channels=channels, ratio=ratio)
        image.set_shape([None, None, channels])
        return image

    branches = [lambda: images.decode_image(data, channels)]
    branches += [lambda r=r: jpeg(r) for r in jpeg_headers.RATIOS]
    if isinstance(index, int):
        return branches[index]()
    return tf.switch_case(index, branches)


def _named_decode(decode, data, *, path):
    """``decode(data)``, or an error naming `path` when the decoder refuses the file.

    For a listing not checked up front (a cold big folder) only: a file whose bytes pass
    `read_checked` can still fail to decode, and TensorFlow's error would not name it. The
    decode runs in a one-element dataset whose failure is caught (`ignore_errors`) and
    turned into a `DataError` message naming the file; that costs a small dataset per
    image, so a checked (warm) listing decodes plainly.
    """
    # Not converted by autograph (its rewrite is most of a decode's tracing time; every
    # branch here is an explicit tf.cond or switch_case).
    decoded = tf.data.Dataset.from_tensors(data).map(tf.autograph.experimental.do_not_convert(
        lambda d: (decode(d), True))).ignore_errors()
    spec = decoded.element_spec[0]
    refused = tf.data.Dataset.from_tensors((tf.zeros(spec.shape, spec.dtype), False))
    image, ok = decoded.concatenate(refused).take(1).get_single_element()
    message = tf.strings.join([
        "DataError: Image file ", path, " cannot be decoded (its first bytes and its ending "
        "look like an image, the data between them is damaged): remove or replace it."])
    with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
        return tf.identity(image)


def make_decoder(*, image_size: Tuple[int, int], channels: int, keep_uint8: bool = True,
                 interpolation: str = "bilinear", crop_to_aspect_ratio: bool = False,
                 pad_to_aspect_ratio: bool = False, jpeg_dct_scaling: bool = False,
                 jpeg_plan=None, check_files: bool = False):
    """Returns ``fn(source, label) -> (image [H, W, channels], label)`` (or ``fn(source)``).

    With `keep_uint8` the image is uint8 (for a cache); otherwise float32 in [0, 255].
    `source` is a path, or with ``jpeg_plan="per_file"`` a dict ``{"path", "jpeg_plan"}``.

    Args:
        jpeg_plan: How each file is decoded, known from its header before training
            (`jpeg_headers.plan`): an int plan index shared by every file (a plain
            `decode_jpeg` at one scale, or the generic decoder: no per-image branching),
            ``"per_file"`` (each element carries its own index), or None: with
            `jpeg_dct_scaling` every image's header is read again while decoding
            (`decode_image_for_size`).
        check_files: Check each file's bytes first and fail naming it when it is not a
            whole image (`read_checked`: for a listing that was not checked up front), or
            when it fails to decode (`_named_decode`).
    """
    images.check_aspect_ratio_options(crop_to_aspect_ratio=crop_to_aspect_ratio,
                                      pad_to_aspect_ratio=pad_to_aspect_ratio)
    # A padded image keeps all its pixels, so the JPEG scale is chosen as without the
    # aspect-ratio options (never smaller than the fitted image needs).
    resize_options = dict(interpolation=interpolation,
                          crop_to_aspect_ratio=crop_to_aspect_ratio,
                          pad_to_aspect_ratio=pad_to_aspect_ratio)

    def from_bytes(data):
        if jpeg_dct_scaling:
            image = decode_image_for_size(data, channels, image_size,
                                          crop_to_aspect_ratio=crop_to_aspect_ratio)
        else:
            image = images.decode_image(data, channels)
        return resized(image)

    def resized(image):
        if keep_uint8:
            # Back to uint8 so the cache and shuffle buffer hold 1 byte per value, not 4,
            # rounded like every other source (data.images).
            return images.resize_to_uint8(image, image_size, **resize_options)
        return images.resize(image, image_size, **resize_options)

    def decode(source, label=None):
        if jpeg_plan == "per_file":
            image = resized(_decode_planned(tf.io.read_file(source["path"]),
                                            tf.cast(source["jpeg_plan"], tf.int32), channels))
        elif jpeg_plan is not None:
            image = resized(_decode_planned(tf.io.read_file(source), jpeg_plan, channels))
        elif check_files:
            image = _named_decode(from_bytes, read_checked(source), path=source)
        else:
            image = from_bytes(tf.io.read_file(source))
        return image if label is None else (image, label)

    # Traced once, as written: every branch on a tensor is an explicit tf.cond or
    # switch_case, so autograph's rewrite of these functions (1.08 of the 1.10 s of tracing
    # in a profiled build of a 100k-file folder, 2 loaded cores) would change nothing.
    return tf.autograph.experimental.do_not_convert(decode)


def _jpeg_plan(paths: List[str], *, listing: Listing, image_size, channels: int,
               crop_to_aspect_ratio: bool, jpeg_dct_scaling: bool, verified: bool):
    """The decode plan of a listed folder: ``(plan for make_decoder, per-file indices)``.

    Only a verified listing is planned (its files were just read and are what the epoch
    will read); 4 channels need the generic decoder's conversion; JPEGs at full scale
    still skip the generic decoder's format checks. The sizes are the listing's check
    results (`_inspect`: no second read of the headers) when it has them.
    """
    if not verified or channels not in (1, 3):
        return None, None
    def scaled(index: int) -> int:
        return index if jpeg_dct_scaling else min(index, 1)  # off: scale 1 for every JPEG

    if listing.results is None:
        indices = [scaled(i) for i in jpeg_headers.plan(
            paths, image_size, crop_to_aspect_ratio=crop_to_aspect_ratio)]
        return (indices[0], None) if len(set(indices)) == 1 else ("per_file", indices)
    by_size: dict = {}  # photos share a few sizes: one rule per size, not per file
    for size in _usable_results(listing):
        kind, shape = _listed_size(size)
        by_size[size] = scaled(jpeg_headers.ratio_index(
            shape if kind == "jpeg" else None, image_size,
            crop_to_aspect_ratio=crop_to_aspect_ratio))
    if channels == 3 and set(by_size.values()) == {jpeg_headers.GENERIC, 1}:
        # Full-scale JPEGs among other formats: the generic decoder reads them alike in RGB
        # (as Keras' loader does), without a per-file branch; a one-size mix of JPEGs and
        # PNGs then resizes a batch at a time (`_one_decoded_size`). Not in grey: libjpeg's
        # own grey (decode_jpeg, Keras' too) differs from the generic decoder's RGB decode
        # and conversion by up to ~7 levels.
        return jpeg_headers.GENERIC, None
    if len(set(by_size.values())) == 1:
        # One decode for every usable file (the chosen ones are among them): no per-path
        # lookup (a dict of a million paths is ~100 MB).
        return next(iter(by_size.values())), None
    found = dict(zip(listing.paths, listing.results))
    indices = [by_size[found[p]] for p in paths]
    return (indices[0], None) if len(set(indices)) == 1 else ("per_file", indices)


def _one_decoded_size(listing: Listing, plan) -> Optional[Tuple[int, int]]:
    """``(height, width)`` every listed image decodes to under `plan`, or None.

    Known when the listing read every usable file's size (a JPEG's frame header, a PNG's
    IHDR) and one decode (an int `plan`) gives them all one size: the generic decoder keeps
    a file's size; a JPEG decoded at a DCT ratio has its header's size divided by the
    ratio, rounded up (libjpeg), and a PNG never takes a DCT plan.
    """
    if listing.results is None or not isinstance(plan, int):
        return None
    ratio = 1 if plan == jpeg_headers.GENERIC else jpeg_headers.RATIOS[plan - 1]
    decoded = set()
    for result in _usable_results(listing):
        kind, shape = _listed_size(result)
        if kind is None or (kind == "png" and plan != jpeg_headers.GENERIC):
            return None
        decoded.add(tuple(-(-side // ratio) for side in shape))
    return decoded.pop() if len(decoded) == 1 else None


def _batch_resize(*, listing: Listing, jpeg_plan, cache, crop, channels: int, image_size,
                  interpolation: str, crop_to_aspect_ratio: bool, pad_to_aspect_ratio: bool,
                  options: tail.TailOptions):
    """``(per-image decode, batch resize)`` for an uncached folder of one image size, or None.

    The resize then runs once a batch (`SourceStages.batch_map_fn`), bit-identical to
    resizing each image and cheaper: 163 vs about 225 µs an image for 256 -> 160 px on an
    AMD EPYC Zen 4 (docs/performance.md). Not with a cache (it holds resized images), a
    random crop, the aspect-ratio options, or per-example work before the batch.
    """
    chosen = options.resolved()
    per_example = callable(chosen.augment) and chosen.augment_on == "example"
    if (cache or crop is not None or crop_to_aspect_ratio or pad_to_aspect_ratio
            or per_example or chosen.batch_by_length):
        return None
    decoded = _one_decoded_size(listing, jpeg_plan)
    if decoded is None:
        return None
    shape = [*decoded, channels]

    def decode(path, label=None):
        image = tf.ensure_shape(_decode_planned(tf.io.read_file(path), jpeg_plan, channels),
                                shape)
        return image if label is None else (image, label)

    def resize(batch):
        return images.resize(batch, image_size, interpolation=interpolation)

    return (tf.autograph.experimental.do_not_convert(decode),
            tf.autograph.experimental.do_not_convert(resize))


_COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}


def _keras_arguments(*, label_mode, labels, color_mode, channels, interpolation, shuffle,
                     shuffle_buffer):
    """Checks Keras-style arguments (with Keras' wording) and maps them onto our own."""
    label_mode, labels = class_folder.check_label_arguments(label_mode=label_mode,
                                                            labels=labels, files="image files")
    if color_mode is not None:
        if color_mode not in _COLOR_MODES:
            raise UserInputError(f"`color_mode` must be one of {sorted(_COLOR_MODES)}, got "
                                 f"color_mode={color_mode!r}.")
        channels = _COLOR_MODES[color_mode]
    shuffle_buffer = class_folder.keras_shuffle(shuffle, shuffle_buffer)
    if isinstance(interpolation, str):
        interpolation = interpolation.lower()  # as Keras
    if interpolation not in images.INTERPOLATIONS:
        raise UserInputError(f"interpolation must be one of {images.INTERPOLATIONS}, got "
                             f"{interpolation!r}.")
    return label_mode, labels, channels, interpolation, shuffle_buffer


def _image_size(image_size) -> Tuple[int, int]:
    if isinstance(image_size, int) and not isinstance(image_size, bool):
        return image_size, image_size  # Keras' square shorthand
    try:
        height, width = (int(v) for v in image_size)
    except (TypeError, ValueError):
        raise UserInputError(f"image_size must be (height, width) or one int for a square, "
                             f"got image_size={image_size!r}.") from None
    return height, width


def from_image_folder(directory, labels: Union[str, Sequence[int], None] = "inferred", *,
                      batch_size: Optional[int] = 32,
                      image_size: Union[int, Sequence[int]] = (256, 256),
                      channels: int = 3, validation_fraction: float = 0.0,
                      subset: Optional[str] = None, seed: Optional[int] = None,
                      shuffle_buffer: Optional[int] = None, cache=None, verify: bool = True,
                      listing: Optional[tuple] = None, label_mode: Optional[str] = "int",
                      class_names: Optional[Sequence[str]] = None,
                      interpolation: str = "bilinear", crop_to_aspect_ratio: bool = False,
                      pad_to_aspect_ratio: bool = False, follow_links: bool = True,
                      color_mode: Optional[str] = None,
                      validation_split: Optional[float] = None,
                      shuffle: Optional[bool] = None, jpeg_dct_scaling: bool = True,
                      deterministic: Optional[bool] = None,
                      random_resized_crop: Union[bool, dict, None] = None,
                      verbose: bool = True, format: str = "tf",
                      augment=None, augment_on="batch", drop_remainder=None,
                      num_parallel_calls=tail.AUTOTUNE, private_threads=None,
                      ram_budget_bytes=None, shard_policy=None, image_dtype="float32",
                      input_context=None, sequential=False, stream=None, service=None,
                      batch_by_length=False, **unknown):
    """Builds batches from ``directory/<class name>/<image>`` files.

    Example::

        train = tfaccel.data.from_image_folder("photos", batch_size=64, image_size=(96, 96),
                                               validation_fraction=0.2, subset="training",
                                               seed=1, augment=["flip", "crop"])
        val = tfaccel.data.from_image_folder("photos", batch_size=64, image_size=(96, 96),
                                             validation_fraction=0.2, subset="validation",
                                             seed=1)
        print(train.class_names)

    Files that are not images, and images that are corrupt or cut short, are skipped and
    counted in ONE warning (count and first paths) before training starts; on the first run
    over a folder of `DEFER_CHECK_FROM` images or more (no saved listing), each is checked
    as it is decoded instead, and a bad one stops the epoch with an error naming it.

    A drop-in for `keras.utils.image_dataset_from_directory` (Keras' own tests of it run
    against this function: tests/test_image_folder_keras_suite.py): `batch_size`,
    `image_size` (and their defaults), `labels`, `label_mode`, `class_names`, `color_mode`,
    `interpolation`, `crop_to_aspect_ratio`, `pad_to_aspect_ratio`, `follow_links`,
    `validation_split`, `subset` and `shuffle` mean what they mean there, with Keras' checks
    and error wording (a `UserInputError` is a `ValueError`), and the result has the same
    `element_spec`, class names and labels. With Keras' names (`validation_split`,
    `subset`, `seed`) the subsets hold exactly Keras' files: the listing is permuted by
    Keras' seeded rule and the last ``int(validation_split * n)`` are held out.
    `validation_fraction` holds out the same count (`splits.keras_held_out_count`)
    of the usable files, chosen by the seed (None: 0) whether or not the subset is
    shuffled. Differences: a validation subset of ``subset="both"`` is
    neither shuffled nor augmented (`augment` and `random_resized_crop` are the training
    subset's); `follow_links` defaults to True; Keras' `data_format` is not taken
    (channels-last images).

    Whenever it shuffles, the listing (or the chosen subset) is permuted once, seeded
    (`tfaccel.data.order`), before decoding and caching: a folder sorted by class still
    gives batches of every class with a cache and a shuffle buffer smaller than the data.
    A file `cache` is fingerprinted with the files (names, sizes, times), their order and
    every decode setting, and rebuilt when any of them changes.

    Args:
        directory: Root folder; each sub-folder is a class, classes are sorted by name
            (Keras' first argument; `labels` is its second, as in Keras).
        batch_size: The GLOBAL batch size; None yields single images (unbatched), as Keras.
        image_size: ``(height, width)`` every image is resized to, or one int for a square.
        channels: 1 (grey), 3 (RGB) or 4 (RGBA).
        validation_fraction: Share of images held out when `subset` is given.
        subset: None (all images), ``"training"``, ``"validation"`` or ``"both"`` (the
            pair, from one listing of the folder).
        seed: Seeds the listing's permutation, shuffling and augmentation (None: different
            every run), and tfaccel's validation_fraction split (None: 0, so both calls
            agree). Keras' validation_split with shuffling needs it, as in Keras.
        shuffle_buffer: Shuffle buffer in examples, 0 for no shuffling (file order kept):
            over file paths before decoding (cheap) without `cache`, over decoded images
            after the cache with it. None: every image without a cache, up to 10,000 with
            one. Any size above 0 first permutes the listing once, seeded.
        cache: None, ``"memory"`` or a file path; see `tfaccel.data.optimize`.
        verify: Check every file's header and ending before training (reads up to 5 KiB
            each, once: the results are saved and reused for the files of a sub-folder
            that has not changed since, see `tfaccel.data.listing_cache`).
        listing: The result of `list_image_folder(directory)`, to list a folder once for both
            subsets (None lists it here).
        label_mode: "int" (int32 [B]), "categorical" (one-hot float32 [B, classes]),
            "binary" (float32 [B, 1], two classes only) or None (images alone).
        class_names: Use only these sub-folders, labelled in this order (only with
            ``labels="inferred"``).
        interpolation: Resize method: bilinear, nearest, bicubic, area, lanczos3, lanczos5,
            gaussian or mitchellcubic.
        crop_to_aspect_ratio: Take the largest centred crop of the target aspect ratio
            before resizing, instead of distorting the image.
        pad_to_aspect_ratio: Resize the whole image to fit and pad it with black bars,
            instead of distorting it (not with `crop_to_aspect_ratio`).
        follow_links: Descend into symbolic links to folders.
        labels: "inferred" (from the sub-folders), None (every image below `directory`, in any
            sub-folder or none, without labels; ``label_mode=None`` means the same, as in
            Keras), or a list of integer labels, one per image file below `directory` in Keras'
            listing order (class names: the distinct labels as strings). A file skipped as
            unreadable is left out with its label.
        color_mode: Keras' name for `channels`: "grayscale", "rgb" or "rgba".
        validation_split: Keras' name for `validation_fraction`.
        shuffle: Keras' switch: False is `shuffle_buffer=0`; True keeps `shuffle_buffer`.
        jpeg_dct_scaling: Decode a JPEG at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling)
            when the target is at most that fraction of it in both sides, then resize:
            several times less decoding work for photos resized small, slightly different
            (smoother) pixels than a full decode. False: always decode in full, like Keras.
            Whole images only: `random_resized_crop` windows have their own switch.
        deterministic: Keep the element order fixed (see `tfaccel.data.optimize`). None:
            fixed when a `seed` is given (the same seed gives the same order, as Keras'
            loader does) or when not shuffling (order of `file_paths`); otherwise the
            parallel decode hands out whichever image is ready first, which is faster.
        random_resized_crop: True (or ``{"scale": (lo, hi), "ratio": (lo, hi)}``) for the
            standard ImageNet training crop, drawn anew every epoch: a random region of 8%
            to 100% of the image of aspect ratio 3/4 to 4/3, resized to `image_size`
            (`tfaccel.data.crops`). Only the region of a JPEG is decoded, at full scale
            (``"dct_scaling": True`` in the dict: at 1/2, 1/4 or 1/8 scale when it is that
            many times the output; measured slower for windows, unlike whole images). The cache
            then holds the files' bytes, and the crop comes after cache and shuffle. Not
            with `crop_to_aspect_ratio` or `pad_to_aspect_ratio`; give it to the training
            subset only (validation resizes the whole image).
        verbose: Print Keras' "Found N files belonging to K classes." line and, where a
            fraction is held out, its "Using N files for training." / "... for
            validation." lines.
        format: Keras' "tf" (a `tf.data.Dataset`, the only one made); "grain" is refused.
        augment: Augmentation names or a callable (`optimize`'s `augment`).
        augment_on: Where a callable `augment` runs (`optimize`'s `augment_on`).
        drop_remainder: None: True when more than one replica is in sync.
        num_parallel_calls: Parallelism of the maps (AUTOTUNE).
        private_threads: As `optimize`'s.
        ram_budget_bytes: As `optimize`'s.
        shard_policy: As `optimize`'s.
        image_dtype: uint8 images are cast to this dtype after the cache (None: kept uint8).
        input_context: From ``distribute_datasets_from_function`` (`optimize`'s).
        sequential: The benchmarks' truly sequential pipeline (`optimize`'s).
        stream: An `EpochStream`: a resumable stream of passes (`optimize`'s).
        service: A `ServiceTarget`: run the tail on a tf.data service (`optimize`'s).
        batch_by_length: Batch texts and sequences of similar length together (`optimize`'s).
        **unknown: Refused, naming the nearest keyword (`tail.refuse_unknown`).

    Returns:
        A `tf.data.Dataset` of ``(images float32 [B, H, W, C] in [0, 255], labels)`` (no
        B with ``batch_size=None``; uint8 with ``interpolation="nearest"``, as Keras) with
        attributes ``class_names``, ``file_paths`` and ``skipped_files``; with
        ``subset="both"`` a ``(training, validation)`` pair of them.

    Raises:
        DataError: Missing path, not a folder, no class sub-folders, no usable image.
        UserInputError: A bad argument value.
    """
    class_folder.check_format(format)
    tail.refuse_unknown(unknown, builder=from_image_folder)
    options = tail.TailOptions(
        seed=seed, cache=cache, deterministic=deterministic, augment=augment,
        augment_on=augment_on, drop_remainder=drop_remainder,
        num_parallel_calls=num_parallel_calls, private_threads=private_threads,
        ram_budget_bytes=ram_budget_bytes, shard_policy=shard_policy, image_dtype=image_dtype,
        input_context=input_context, sequential=sequential, stream=stream, service=service,
        batch_by_length=batch_by_length)
    return image_folder_dataset(
        directory, labels, batch_size=batch_size, image_size=image_size, channels=channels,
        validation_fraction=validation_fraction, subset=subset,
        shuffle_buffer=shuffle_buffer, verify=verify, listing=listing,
        label_mode=label_mode, class_names=class_names, interpolation=interpolation,
        crop_to_aspect_ratio=crop_to_aspect_ratio, pad_to_aspect_ratio=pad_to_aspect_ratio,
        follow_links=follow_links, color_mode=color_mode, validation_split=validation_split,
        shuffle=shuffle, jpeg_dct_scaling=jpeg_dct_scaling,
        random_resized_crop=random_resized_crop, verbose=verbose, options=options)


def image_folder_dataset(directory, labels: Union[str, Sequence[int], None] = "inferred", *,
                         options: tail.TailOptions, batch_size: Optional[int] = 32,
                         image_size: Union[int, Sequence[int]] = (256, 256),
                         channels: int = 3, validation_fraction: float = 0.0,
                         subset: Optional[str] = None, shuffle_buffer: Optional[int] = None,
                         verify: bool = True, listing: Optional[tuple] = None,
                         label_mode: Optional[str] = "int",
                         class_names: Optional[Sequence[str]] = None,
                         interpolation: str = "bilinear", crop_to_aspect_ratio: bool = False,
                         pad_to_aspect_ratio: bool = False, follow_links: bool = True,
                         color_mode: Optional[str] = None,
                         validation_split: Optional[float] = None,
                         shuffle: Optional[bool] = None, jpeg_dct_scaling: bool = True,
                         random_resized_crop: Union[bool, dict, None] = None,
                         verbose: bool = True):
    """`from_image_folder` with the tail's options as one `TailOptions` (what the source
    calls; ``deterministic`` None or unset: as `from_image_folder`'s None); the other
    arguments and their defaults as `from_image_folder`'s."""
    path = directory  # the name below; Keras calls the argument directory
    # The caller's own order switch (None: decided per subset), then only what the caller
    # chose: the loader decides the rest (the shard policy, uint8 for nearest).
    deterministic = None if options.deterministic is tail.UNSET else options.deterministic
    options = options.without(["deterministic"]).chosen()
    seed, cache = options.resolved().seed, options.resolved().cache
    label_mode, labels, channels, interpolation, shuffle_buffer = _keras_arguments(
        label_mode=label_mode, labels=labels, color_mode=color_mode, channels=channels,
        interpolation=interpolation, shuffle=shuffle, shuffle_buffer=shuffle_buffer)
    if channels not in (1, 3, 4):
        raise UserInputError(f"channels must be 1, 3 or 4, got {channels!r}.")
    height, width = _image_size(image_size)
    crop = _random_crop_decoder(random_resized_crop, image_size=(height, width),
                                channels=channels, interpolation=interpolation,
                                crop_to_aspect_ratio=crop_to_aspect_ratio,
                                pad_to_aspect_ratio=pad_to_aspect_ratio)
    # One seeded permutation of the listing whenever the data is shuffled at all, so the
    # cache holds a mixed order (data.order); shuffle=False / shuffle_buffer=0 keeps it.
    shuffled = shuffle_buffer != 0
    class_folder.check_split_arguments(validation_split=validation_split,
                           validation_fraction=validation_fraction, subset=subset,
                           shuffled=shuffled, seed=seed)
    listing = listing or list_image_folder(path, verify=verify, class_names=class_names,
                                           follow_links=follow_links, labels=labels)
    class_folder.check_binary(listing, label_mode=label_mode, path=path)
    class_folder.warn_skipped(logger, listing, path=path, extension="/".join(IMAGE_EXTENSIONS),
                              unreadable="not readable JPEG/PNG/GIF/BMP images")
    if verbose:
        class_folder.say_found(listing)
    make = functools.partial(
        _folder_dataset, listing=listing, batch_size=batch_size, image_size=(height, width),
        channels=channels, label_mode=label_mode, interpolation=interpolation,
        crop_to_aspect_ratio=crop_to_aspect_ratio, pad_to_aspect_ratio=pad_to_aspect_ratio,
        jpeg_dct_scaling=jpeg_dct_scaling, verified=verify, shuffled=shuffled,
        deterministic=deterministic, crop=crop,
        given_labels=class_folder.labels_fingerprint(labels, cache))
    # Each subset of "both" caches into its own files, by the same rule as a recipe's
    # splits; the validation subset resizes whole images (no random crop).
    return class_folder.keras_subsets(
        listing, make, subset=subset, validation_split=validation_split,
        validation_fraction=validation_fraction, seed=seed, shuffle_buffer=shuffle_buffer,
        noun="images", options=options, validation_only={"crop": None}, verbose=verbose)


def _read_bytes(path, label=None, *, read=tf.io.read_file):
    data = read(path)
    return data if label is None else (data, label)


def _random_crop_decoder(option, *, image_size, channels: int, interpolation: str,
                         crop_to_aspect_ratio: bool, pad_to_aspect_ratio: bool):
    """`from_image_folder`'s `random_resized_crop` as a `crops` decoder, or None (off)."""
    if option is None or option is False:
        return None
    if option is True:
        option = {}
    if not isinstance(option, dict) or set(option) - {"scale", "ratio", "dct_scaling"}:
        raise UserInputError(f"random_resized_crop must be True, False, None or a dict with "
                             f"'scale', 'ratio' and/or 'dct_scaling', got {option!r}.")
    dct_scaling = option.get("dct_scaling", False)
    if not isinstance(dct_scaling, bool):
        raise UserInputError(f"random_resized_crop's 'dct_scaling' must be true or false, got "
                             f"{dct_scaling!r}.")
    if crop_to_aspect_ratio or pad_to_aspect_ratio:
        raise UserInputError("random_resized_crop chooses its own region; it cannot be "
                             "combined with crop_to_aspect_ratio or pad_to_aspect_ratio.")
    # Windows decode at full scale unless asked: at DCT scale they measured 5-12% slower on
    # an AMD EPYC Zen 4 (4 runs) and no faster on an AVX2 EPYC (benchmarks/bench_data_crop.py),
    # so `jpeg_dct_scaling` (a win for whole images) does not apply to them.
    return crops.make_random_crop_decoder(
        image_size=image_size, channels=channels, interpolation=interpolation,
        dct_scaling=dct_scaling, scale=option.get("scale", crops.SCALE),
        ratio=option.get("ratio", crops.RATIO))


def _folder_dataset(paths, labels, *, listing: Listing, batch_size: Optional[int],
                    image_size, channels: int, label_mode, interpolation: str,
                    crop_to_aspect_ratio: bool, pad_to_aspect_ratio: bool,
                    jpeg_dct_scaling: bool, verified: bool, shuffled: bool,
                    deterministic: Optional[bool], shuffle_buffer: Optional[int],
                    options: tail.TailOptions, crop=None, given_labels: dict):
    """The pipeline of one subset's chosen files (see `from_image_folder`): the image
    decode, then `class_folder.paths_dataset`. `options`: what the caller chose
    (`TailOptions.chosen`); `given_labels`: their part of a cache's fingerprint."""
    cache = options.resolved().cache
    # A listing not checked up front (a cold big folder): each file is checked as it is
    # read, and a bad one stops the run naming it (no decode error is skipped unnamed).
    check_files = verified and listing.deferred
    verified = verified and not listing.deferred
    jpeg_plan, per_file, random_decode = None, None, None
    if crop is None:  # a random crop reads the window's size from each header itself
        jpeg_plan, per_file = _jpeg_plan(paths, listing=listing, image_size=image_size,
                                         channels=channels,
                                         crop_to_aspect_ratio=crop_to_aspect_ratio,
                                         jpeg_dct_scaling=jpeg_dct_scaling, verified=verified)
    if shuffle_buffer is None:
        # Default: every image (a few bytes of path each without a cache; after a cache,
        # up to _CACHED_SHUFFLE_CAP decoded images: the permuted listing mixes the rest).
        shuffle_buffer = min(len(paths), _CACHED_SHUFFLE_CAP) if cache else len(paths)
    if interpolation == "nearest":
        # Keras' loader keeps the decoder's uint8 for nearest-neighbour resizing.
        if options.image_dtype is tail.UNSET:
            options = dataclasses.replace(options, image_dtype=None)
    batch_map_fn = None
    batched = _batch_resize(listing=listing, jpeg_plan=jpeg_plan, cache=cache, crop=crop,
                            channels=channels, image_size=image_size,
                            interpolation=interpolation,
                            crop_to_aspect_ratio=crop_to_aspect_ratio,
                            pad_to_aspect_ratio=pad_to_aspect_ratio, options=options)
    if crop is not None:
        # A random crop comes after the cache and the shuffle (stage 3b of `optimize`):
        # with a cache the files' bytes are read into it, without one each epoch reads and
        # crops in the same parallel map (one stage less: measured ~10% on 2 cores).
        read = read_checked if check_files else tf.io.read_file
        map_fn = (lambda path, label=None: _read_bytes(path, label, read=read)) if cache \
            else None
        if cache:
            random_decode = crop
        elif check_files:
            random_decode = lambda path, seed: _named_decode(
                lambda data: crop(data, seed), read_checked(path), path=path)
        else:
            random_decode = lambda path, seed: crop(tf.io.read_file(path), seed)
    elif batched is not None:
        map_fn, batch_map_fn = batched
    else:
        map_fn = make_decoder(image_size=image_size, channels=channels,
                              # uint8 only into a cache (and the shuffle buffer after it;
                              # without a cache the paths are shuffled instead): otherwise
                              # the round trip only adds work (a cast back to float per
                              # batch), measured 2-4% of a JPEG pipeline on 2 cores.
                              keep_uint8=bool(cache),
                              interpolation=interpolation,
                              crop_to_aspect_ratio=crop_to_aspect_ratio,
                              pad_to_aspect_ratio=pad_to_aspect_ratio,
                              jpeg_dct_scaling=jpeg_dct_scaling, jpeg_plan=jpeg_plan,
                              check_files=check_files)
    # No ignore_errors stage: it made the length unknown (len() failed and fit warned "Your
    # input ran out of data", where Keras' length is known). A file the listing passed that
    # still fails to decode stops the epoch, as in Keras' loader; on a cold big folder it
    # is named (`_named_decode`).
    return class_folder.paths_dataset(
        paths, labels, listing=listing, label_mode=label_mode, batch_size=batch_size,
        map_fn=map_fn, shuffled=shuffled, deterministic=deterministic,
        shuffle_buffer=shuffle_buffer, options=options,
        per_file=None if per_file is None else {"jpeg_plan": per_file},
        random_decode=random_decode, batch_map_fn=batch_map_fn,
        fingerprint={
            "builder": "from_image_folder", "image_size": list(image_size),
            "channels": channels, "interpolation": interpolation,
            "crop_to_aspect_ratio": crop_to_aspect_ratio,
            "pad_to_aspect_ratio": pad_to_aspect_ratio, "jpeg_dct_scaling": jpeg_dct_scaling,
            # A random crop caches the files' bytes, not decoded images.
            "cached": "file bytes" if crop is not None else "decoded images",
            **given_labels})


class ImageFolderSource(base.Source):
    """``data.source: image_folder``: class sub-folders, listed and checked once for both splits."""

    names = ("image_folder",)

    def build(self, *, batch_size, common, train_options, validation_options) -> base.Built:
        config = self.config
        listing = list_image_folder(config.path)
        kwargs = dict(image_size=config.image_size, channels=config.channels, listing=listing,
                      jpeg_dct_scaling=config.jpeg_dct_scaling, verbose=False)
        fraction = config.validation_fraction
        train_options = common.merged(train_options)
        augment = train_options.resolved().augment or []
        crop = None
        if "random_resized_crop" in augment:  # made while decoding (data.crops), not after
            crop = True
            train_options = dataclasses.replace(train_options, augment=[
                a for a in augment if a != "random_resized_crop"] or None)
        train = image_folder_dataset(
            config.path, batch_size=batch_size, validation_fraction=fraction,
            subset="training" if fraction else None, shuffle_buffer=config.shuffle_buffer,
            random_resized_crop=crop, **kwargs, options=train_options)
        val = None
        if fraction:
            val = image_folder_dataset(
                config.path, batch_size=batch_size, validation_fraction=fraction,
                subset="validation", shuffle_buffer=0, **kwargs,
                options=common.merged(validation_options))
        return base.Built(train=train, validation=val, num_classes=len(train.class_names),
                          class_names=train.class_names, train_examples=len(train.file_paths),
                          validation_examples=None if val is None else len(val.file_paths))

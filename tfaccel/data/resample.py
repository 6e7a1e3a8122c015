"""Waveforms from one sample rate to another in TensorFlow ops: a polyphase windowed-sinc filter."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

# scipy.signal.resample_poly's default filter: a Kaiser-windowed sinc (beta 5.0, about 54 dB
# of stop-band attenuation) of 10 zero crossings on each side at the lower of the two rates.
# The same design, so the output equals resample_poly's to float32 rounding (tested).
KAISER_BETA = 5.0
HALF_ZERO_CROSSINGS = 10


class Plan(NamedTuple):
    """How one (orig, target) pair is resampled: the rational ratio and the filter.

    Attributes:
        up: Upsampling factor (target / gcd).
        down: Downsampling factor (orig / gcd).
        half_len: Half the low-pass filter's length, in samples at ``orig * up``.
        weights: float32 ``[width, 1, up]``: column r is the taps that make output sample
            ``q * up + r`` from input samples ``q * down + first + j``, j < width.
        first: Offset of the filter's first tap from ``q * down`` (<= 0).
    """

    up: int
    down: int
    half_len: int
    weights: np.ndarray
    first: int


@functools.lru_cache(maxsize=32)
def plan(orig: int, target: int) -> Plan:
    """The filter from `orig` Hz to `target` Hz, designed once per pair (in NumPy).

    The low-pass is ``scipy.signal.firwin(2 * half_len + 1, 1 / max(up, down),
    window=("kaiser", 5.0))`` times `up`, as in ``scipy.signal.resample_poly``: its cut-off
    is the lower Nyquist frequency of the two rates, so nothing above the new Nyquist
    frequency folds back when downsampling, and no image of the spectrum is left when
    upsampling.

    Args:
        orig: The waveform's sample rate, Hz.
        target: The rate wanted, Hz.
    """
    g = math.gcd(orig, target)
    up, down = target // g, orig // g
    half_len = HALF_ZERO_CROSSINGS * max(up, down)
    m = np.arange(2 * half_len + 1, dtype=np.float64) - half_len
    cutoff = 1.0 / max(up, down)
    taps = cutoff * np.sinc(cutoff * m) * np.kaiser(2 * half_len + 1, KAISER_BETA)
    taps *= up / taps.sum()  # unit gain at DC after the zero-stuffing of `up`
    # Output k = q * up + r sums x[i] * taps[k * down + half_len - i * up]; with
    # i = q * down + c that is x[q * down + c] * taps[r * down + half_len - c * up], the same
    # for every q: one strided convolution with `up` output columns (one per phase r).
    first = -(half_len // up)
    last = ((up - 1) * down + half_len) // up
    weights = np.zeros((last - first + 1, 1, up), np.float32)
    for r in range(up):
        for c in range(first, last + 1):
            t = r * down + half_len - c * up
            if 0 <= t <= 2 * half_len:
                weights[c - first, 0, r] = taps[t]
    return Plan(up, down, half_len, weights, first)


def output_length(frames, *, orig: int, target: int):
    """``ceil(frames * target / orig)`` in lowest terms: the length `resample` returns (that of
    ``scipy.signal.resample_poly``). Works on ints and on integer tensors."""
    p = plan(orig, target)
    return (frames * p.up + p.down - 1) // p.down


def frames_needed(output_frames: int, *, orig: int, target: int) -> int:
    """Input samples that decide the first `output_frames` output samples exactly.

    A waveform cut to this length (or shorter) resamples to the same first `output_frames`
    samples as the whole waveform: the decoder reads no more of a long file than that.
    """
    p = plan(orig, target)
    return ((output_frames - 1) * p.down + p.half_len) // p.up + 1


def resample(audio: tf.Tensor, *, orig: int, target: int) -> tf.Tensor:
    """`audio` ``[time, channels]`` from `orig` Hz to `target` Hz (float32, graph-safe).

    ``scipy.signal.resample_poly(audio, up, down, axis=0)`` with ``up / down = target /
    orig`` in lowest terms, in TensorFlow ops (one ``tf.nn.conv1d`` with stride `down`
    over the channels as a batch), so it runs inside a ``tf.data`` map: the output has
    ``ceil(time * up / down)`` samples, zeros assumed beyond both ends (as scipy), any
    number of channels, and equals scipy's to float32 rounding.

    Args:
        audio: float32 ``[time, channels]`` (time and channels may be unknown).
        orig: Its sample rate, Hz.
        target: The rate wanted, Hz.

    Returns:
        float32 ``[ceil(time * target / orig), channels]``; `audio` itself if the rates
        are equal.
    """
    if orig == target:
        return audio
    p = plan(orig, target)
    audio = tf.convert_to_tensor(audio, tf.float32)
    frames = tf.shape(audio, out_type=tf.int64)[0]
    n_out = output_length(frames, orig=orig, target=target)
    blocks = (n_out + p.up - 1) // p.up  # conv outputs: `up` samples each
    width = p.weights.shape[0]
    # Zeros before (the taps reaching back) and after, so every block has its `width` inputs.
    after = tf.maximum((blocks - 1) * p.down + width + p.first - frames, 0)
    padded = tf.pad(tf.transpose(audio), tf.stack([tf.constant([0, 0], tf.int64),
                                                   tf.stack([tf.constant(-p.first, tf.int64),
                                                             after])]))
    phases = tf.nn.conv1d(padded[:, :, tf.newaxis], p.weights, stride=p.down,
                          padding="VALID")  # [channels, blocks, up]
    channels = tf.shape(audio)[1]
    out = tf.reshape(phases[:, :blocks], tf.stack([channels, -1]))[:, :n_out]
    out = tf.transpose(out)
    out.set_shape([None, audio.shape[1]])
    return out

"""tfaccel.data.resample against scipy.signal.resample_poly and against the tones themselves."""

import math

import numpy as np
import pytest
import scipy.signal
import tensorflow as tf

from tfaccel.data import resample

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

PAIRS = [(16000, 8000), (22050, 16000), (8000, 16000), (44100, 16000), (16000, 44100)]
# One output sample is a float32 sum of at most ~60 products of |x| <= 1 and the filter's
# weights; TensorFlow's conv1d may block that sum differently for inputs of another shape
# (another length, another channel count) or on another CPU (AVX2 vs AVX-512), so two such
# results agree up to rounding, not bit for bit: seen 3e-7 apart, a few float32 ulps of the
# partial sums. 1e-6 per unit of input amplitude is that bound with a margin; a wrong sample
# (one input frame too few) was off by 3e-5 to 5e-3, measured on these tones.
ROUNDING = 1e-6


def tones(rate: int, frames: int, freqs=(440.0, 3000.0)) -> np.ndarray:
    """float32 ``[frames, len(freqs)]``: one sine per channel."""
    t = np.arange(frames) / rate
    return np.stack([np.sin(2 * np.pi * f * t) for f in freqs], axis=1).astype(np.float32)


def edge(orig: int, target: int) -> int:
    """Output samples at each end that the zeros beyond the waveform reach (half the filter,
    in output samples, plus 2)."""
    p = resample.plan(orig, target)
    return p.half_len // p.down + 2


@pytest.mark.parametrize("orig,target", PAIRS)
@pytest.mark.parametrize("frames", [1, 7, 999, 4000])
def test_equals_scipy_resample_poly_everywhere(orig, target, frames):
    x = tones(orig, frames)
    g = math.gcd(orig, target)
    theirs = scipy.signal.resample_poly(x.astype(np.float64), target // g, orig // g, axis=0)
    ours = resample.resample(tf.constant(x), orig=orig, target=target)
    assert ours.dtype == tf.float32
    assert ours.shape == theirs.shape == (math.ceil(frames * target / orig), 2)
    # The same filter as scipy's default (Kaiser beta 5, 10 zero crossings a side) and the
    # same zeros beyond both ends, so edges included the only difference is float32
    # rounding of a sum of at most ~60 products of |x| <= 1 (measured <= 5e-7).
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=0, atol=2e-6)


@pytest.mark.parametrize("orig,target", PAIRS)
@pytest.mark.parametrize("freq", [440.0, 3000.0])
def test_a_tone_below_both_nyquists_comes_out_as_the_same_tone(orig, target, freq):
    y = resample.resample(tones(orig, orig, (freq,)), orig=orig, target=target).numpy()
    e = edge(orig, target)
    expected = tones(target, len(y), (freq,))
    # Kaiser beta 5's pass-band ripple is about 10**(-54 / 20) = 0.002 (measured <= 0.002).
    assert np.abs(y[e:-e] - expected[e:-e]).max() < 2.5e-3


def test_a_tone_above_the_new_nyquist_is_suppressed_by_more_than_40_db():
    y = resample.resample(tones(16000, 16000, (7000.0,)), orig=16000, target=8000).numpy()
    e = edge(16000, 8000)
    level = 20 * np.log10(np.sqrt(np.mean(y[e:-e] ** 2)) / np.sqrt(0.5))
    assert level < -40  # measured -75.7 dB: 7 kHz would fold back to 1 kHz


@pytest.mark.parametrize("orig,target", PAIRS)
def test_dc_is_preserved(orig, target):
    y = resample.resample(np.ones((orig // 10, 3), np.float32), orig=orig, target=target)
    e = edge(orig, target)
    assert np.abs(y.numpy()[e:-e] - 1).max() < 1e-3  # measured <= 5.2e-4 (8 kHz -> 16 kHz)


def test_equal_rates_return_the_waveform_itself():
    x = tf.constant(tones(16000, 10))
    assert resample.resample(x, orig=16000, target=16000) is x


@pytest.mark.parametrize("channels", [1, 2, 5])
def test_any_channel_count_and_an_empty_waveform(channels):
    x = np.random.default_rng(channels).normal(size=(301, channels)).astype(np.float32)
    y = resample.resample(x, orig=48000, target=16000)
    assert y.shape == (101, channels)
    for c in range(channels):  # each channel alone gives the same samples
        alone = resample.resample(x[:, c:c + 1], orig=48000, target=16000)
        # Up to float32 rounding: the channels are conv1d's batch, and another batch size
        # may block the sums differently (ROUNDING).
        np.testing.assert_allclose(y.numpy()[:, c], alone.numpy()[:, 0], rtol=0,
                                   atol=ROUNDING * np.abs(x).max())
    assert resample.resample(np.zeros((0, channels), np.float32), orig=8000,
                             target=16000).shape == (0, channels)


def test_runs_in_a_tf_data_map_on_unknown_lengths():
    lengths = [5, 160, 333]
    ds = tf.data.Dataset.from_generator(
        lambda: (tones(22050, n) for n in lengths),
        output_signature=tf.TensorSpec([None, 2], tf.float32))
    ds = ds.map(lambda x: resample.resample(x, orig=22050, target=16000))
    assert ds.element_spec.shape.as_list() == [None, 2]
    got = [x.numpy() for x in ds]
    assert [len(x) for x in got] == [math.ceil(n * 16000 / 22050) for n in lengths]
    for n, x in zip(lengths, got):  # tf.data's threads may block the sums otherwise
        np.testing.assert_allclose(
            x, resample.resample(tones(22050, n), orig=22050, target=16000).numpy(),
            rtol=0, atol=ROUNDING)


@pytest.mark.parametrize("orig,target", PAIRS)
def test_frames_needed_decide_the_first_outputs(orig, target):
    x = tones(orig, 3000)
    whole = resample.resample(x, orig=orig, target=target).numpy()
    out = 200
    need = resample.frames_needed(out, orig=orig, target=target)
    cut = resample.resample(x[:need], orig=orig, target=target).numpy()
    # The same samples and weights, summed by conv1d over inputs of another length: equal up
    # to float32 rounding, not bit for bit (an AVX2-only CPU blocked them 3e-7 apart).
    np.testing.assert_allclose(cut[:out], whole[:out], rtol=0, atol=ROUNDING)
    # About out * orig / target and half a filter more, not the whole waveform.
    p = resample.plan(orig, target)
    assert need <= math.ceil(out * orig / target) + p.half_len // p.up + 1


def test_the_filter_is_designed_once_per_pair():
    assert resample.plan(22050, 16000) is resample.plan(22050, 16000)
    p = resample.plan(22050, 16000)
    assert (p.up, p.down, p.half_len) == (320, 441, 4410)
    assert resample.output_length(22050, orig=22050, target=16000) == 16000

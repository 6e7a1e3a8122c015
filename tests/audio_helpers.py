"""WAV files for the audio tests: noise or tones, written where a test wants them."""

import numpy as np
import tensorflow as tf

RATE = 8000


def wav(frames: int, channels: int = 2, rate: int = RATE, seed: int = 0) -> bytes:
    """A WAV file of uniform noise in [-1, 1), 16-bit PCM."""
    audio = np.random.default_rng(seed).uniform(-1, 1, (frames, channels)).astype(np.float32)
    return tf.audio.encode_wav(audio, rate).numpy()


def tone(frequency: float, *, frames: int, rate: int = RATE, seed: int = 0) -> bytes:
    """A mono WAV file: a sine at `frequency` Hz, random phase and loudness, a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / rate
    audio = rng.uniform(0.2, 0.8) * np.sin(2 * np.pi * frequency * t + rng.uniform(0, 6.3))
    audio += rng.normal(0, 0.05, frames)
    return tf.audio.encode_wav(np.clip(audio, -1, 1).astype(np.float32)[:, None],
                               rate).numpy()


def write(path, data: bytes):
    """Writes `data` at `path`, making its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def tone_folder(root, *, frequencies=(300, 900, 2000), per_class: int = 24,
                frames=(1200, 2400), rate: int = RATE):
    """``root/<class>/<i>.wav``: one class per tone frequency, lengths drawn in `frames`."""
    rng = np.random.default_rng(0)
    for c, frequency in enumerate(frequencies):
        for i in range(per_class):
            write(root / f"tone{frequency}" / f"{i:03d}.wav",
                  tone(frequency, frames=int(rng.integers(*frames)), rate=rate,
                       seed=c * 1000 + i))
    return root

"""Vectorised numpy generator of noisy coloured-shape images (no TensorFlow)."""

import numpy as np

from tfaccel.datasets.catalog import CLASS_NAMES, IMAGE_SHAPE

_SIZE = IMAGE_SHAPE[0]


def _rotate(dx, dy, angle):
    """Coordinates of every pixel in each shape's own rotated frame."""
    cos, sin = np.cos(angle), np.sin(angle)
    return cos * dx + sin * dy, -sin * dx + cos * dy


def _signed_distance(labels, dx, dy, radius, angle):
    """Approximate signed distance (pixels, negative inside) from each pixel to its shape.

    Every class is computed for every image and the right one picked with the label: at
    32x32 that is cheaper and simpler than grouping images by class.
    """
    u, v = _rotate(dx, dy, angle)
    circle = np.sqrt(dx * dx + dy * dy) - radius
    # Shapes are scaled so that their areas are comparable and area alone does not give
    # the class away.
    half = 0.85 * radius
    square = np.maximum(np.abs(u), np.abs(v)) - half
    # Equilateral triangle as the intersection of three half-planes around the centre.
    tri = np.full_like(u, -np.inf)
    apothem = 0.6 * radius
    for k in range(3):
        theta = np.pi / 2 + k * 2 * np.pi / 3
        tri = np.maximum(tri, u * np.cos(theta) + v * np.sin(theta) - apothem)
    arm = 0.3 * radius
    bar_h = np.maximum(np.abs(u) - radius, np.abs(v) - arm)
    bar_v = np.maximum(np.abs(u) - arm, np.abs(v) - radius)
    cross = np.minimum(bar_h, bar_v)
    # Same order as CLASS_NAMES, which is the label order.
    stacked = np.stack([circle, square, tri, cross])  # (classes, n, H, W)
    return np.take_along_axis(stacked, labels[None, :, None, None], axis=0)[0]


def _render(rng, labels, radius, cx, cy, angle):
    """Renders one chunk of images from per-image shape parameters (1-D arrays)."""
    n = labels.shape[0]
    grid = np.arange(_SIZE, dtype=np.float32)
    per_image = (n, 1, 1)
    dx = grid[None, None, :] - cx.reshape(per_image)
    dy = grid[None, :, None] - cy.reshape(per_image)
    dist = _signed_distance(
        labels, dx, dy, radius.reshape(per_image), angle.reshape(per_image)
    )
    # One pixel of anti-aliasing so edges look like edges, not a staircase.
    alpha = np.clip(0.5 - dist, 0.0, 1.0)[..., None]

    # Background: a random colour with a random linear gradient across the image.
    background = rng.uniform(0, 255, size=(n, 1, 1, 3)).astype(np.float32)
    slope = rng.uniform(-1.5, 1.5, size=(n, 1, 1, 2)).astype(np.float32)
    ramp = (slope[..., :1] * (grid[None, None, :, None] - 15.5)
            + slope[..., 1:] * (grid[None, :, None, None] - 15.5))
    # Foreground: far enough from the background colour to be visible, any hue.
    direction = rng.standard_normal(size=(n, 1, 1, 3), dtype=np.float32)
    direction /= np.linalg.norm(direction, axis=-1, keepdims=True) + 1e-6
    contrast = rng.uniform(110.0, 200.0, size=(n, 1, 1, 1)).astype(np.float32)
    # Clipping to [0, 255] can eat the contrast near the colour cube's faces; of the two
    # opposite directions, keep the one that ends further from the background.
    plus = np.clip(background + contrast * direction, 0, 255)
    minus = np.clip(background - contrast * direction, 0, 255)
    plus_wins = (np.linalg.norm(plus - background, axis=-1, keepdims=True)
                 >= np.linalg.norm(minus - background, axis=-1, keepdims=True))
    foreground = np.where(plus_wins, plus, minus)

    image = background + ramp + alpha * (foreground - background - ramp)
    # Uniform pixel noise in +-20 (std ~12 of 255): a few times cheaper to draw than
    # Gaussian noise, and just as good at stopping a model from keying on pixel values.
    noise = rng.random(size=image.shape, dtype=np.float32)
    image += (noise - np.float32(0.5)) * np.float32(40.0)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def generate(num_examples, *, seed, chunk_size=512):
    """Generates `num_examples` images of the 4 shape classes, balanced and shuffled.

    Args:
      num_examples: how many images to make.
      seed: integer or sequence of integers for `numpy.random.default_rng`; the same seed
        (and chunk size) always gives the same images and labels.
      chunk_size: images rendered per vectorised step; small enough to stay in cache,
        large enough to amortise numpy's per-call overhead.

    Returns:
      A tuple `(images, labels)`: uint8 array of shape (n, 32, 32, 3) and int64 array of
      shape (n,) with values in [0, 4).
    """
    rng = np.random.default_rng(seed)
    n = int(num_examples)
    # Exactly balanced classes, so a majority-class guess scores 1/4.
    labels = rng.permutation(np.arange(n) % len(CLASS_NAMES)).astype(np.int64)
    radius = rng.uniform(5.0, 11.0, size=n).astype(np.float32)
    # Centres may sit close enough to an edge to clip part of the shape, as real objects do.
    margin = radius * 0.7
    cx = rng.uniform(margin, _SIZE - 1 - margin).astype(np.float32)
    cy = rng.uniform(margin, _SIZE - 1 - margin).astype(np.float32)
    angle = rng.uniform(-np.pi / 12, np.pi / 12, size=n).astype(np.float32)

    images = np.empty((n, _SIZE, _SIZE, 3), dtype=np.uint8)
    for start in range(0, n, chunk_size):
        part = slice(start, start + chunk_size)
        images[part] = _render(rng, labels[part], radius[part], cx[part], cy[part], angle[part])
    return images, labels

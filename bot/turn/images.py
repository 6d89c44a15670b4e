"""Photos made small enough for a model: downscaled to a maximum side and byte size, as JPEG.

A phone photo is 3-12 MB; a vision model reads a 1024-pixel one just as well, and every byte
is paid for in tokens and upload time. Pillow does the work (in a thread: it is CPU work).
The result is a ``data:`` URL for an image part; nothing is written to disk.

A photo is a stranger's bytes decoded in this process, and a 20 kB PNG can claim a
13000 x 13000 canvas (half a gigabyte as RGB). So before any pixel is decoded: only the
formats phones and chat apps send are opened; the size the header claims (``Image.open``
reads no more) must be within :data:`MAX_IMAGE_PIXELS`; a JPEG is then decoded at the
smallest scale that still covers the side wanted (``draft``), anything else is decoded once
and reduced at once; an animation gives its first frame only; and one image is decoded at a
time, whatever the number of turns running. Whatever Pillow cannot or will not read — too
many pixels, a damaged or truncated file, a text chunk over its limits — is
:class:`NotAnImage` with a message, never another error: the turn answers the caption and
says the photo could not be opened (``bot/turn/media.py``).
"""

from __future__ import annotations

import asyncio
import base64
import io
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

from PIL import Image, ImageOps

MAX_IMAGE_PIXELS = 50_000_000
"""The most pixels a photo's header may claim: a 50-megapixel phone photo (8160 x 6120)
passes. Decoding one costs at most 4 bytes a pixel (200 MB, a PNG; a JPEG far less)."""
# Pillow's own bomb check agrees: it warns above the ceiling and refuses above twice it,
# wherever it looks (a GIF frame larger than its screen too)
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
PHOTO_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP")
"""What phones and chat apps send (JPEG covers MPO, a camera JPEG with a second picture);
Pillow's other decoders are never given a stranger's bytes."""
IMAGES_AT_ONCE = 1
"""Photos decoded and compressed at the same time: each may cost the ceiling's worth of
memory, and the work is CPU-bound anyway."""
QUALITIES = (85, 70, 55, 40)
"""JPEG qualities tried in turn until the image fits the byte limit."""
SHRINK_STEP = 0.75
UNREADABLE = (
    OSError,  # not an image, truncated, a broken data stream (UnidentifiedImageError too)
    ValueError,  # a text chunk over MAX_TEXT_CHUNK / MAX_TEXT_MEMORY, a tile outside the image
    SyntaxError,  # a broken chunk or marker found while decoding
    EOFError,  # a frame or chunk cut short
    struct.error,  # a header field cut short
)
"""What Pillow raises for a file it cannot read."""
TOO_MANY_PIXELS = (Image.DecompressionBombError, Image.DecompressionBombWarning)
"""Pillow's bomb check: the error over twice its limit, the warning over it (raised only
where warnings are errors, as under ``python -W error``)."""

_one_at_a_time = threading.BoundedSemaphore(IMAGES_AT_ONCE)
_image_threads = ThreadPoolExecutor(IMAGES_AT_ONCE, thread_name_prefix="images")
"""Photos queue here, not in asyncio's shared pool: waiting for their turn there would hold
threads that file writes and other work need."""


class NotAnImage(ValueError):
    """The bytes are no image Pillow can read; the message says what was wrong."""


class ImageTooLarge(NotAnImage):
    """The image claims more pixels than :data:`MAX_IMAGE_PIXELS`."""


def downscale(data: bytes, max_side: int, max_bytes: int) -> bytes:
    """``data`` as a JPEG no wider or taller than ``max_side`` and no bigger than
    ``max_bytes`` (the side shrinks further if the quality alone cannot get there).
    Raises NotAnImage (ImageTooLarge: too many pixels) before decoding what it refuses."""
    with _one_at_a_time:
        image = _decoded(_opened(data), max_side)
        return _compressed(image, max_side, max_bytes)


def _compressed(image: Image.Image, max_side: int, max_bytes: int) -> bytes:
    side = max_side
    while True:
        image.thumbnail((side, side))
        for quality in QUALITIES:
            out = io.BytesIO()
            image.save(out, "JPEG", quality=quality, optimize=True)
            if out.tell() <= max_bytes:
                return out.getvalue()
        side = max(16, int(max(image.size) * SHRINK_STEP))
        if max(image.size) <= 16:
            return out.getvalue()


def _opened(data: bytes) -> Image.Image:
    """The image with its header read and its pixels not yet decoded; refused over the
    pixel ceiling."""
    try:
        image = Image.open(io.BytesIO(data), formats=PHOTO_FORMATS)
    except TOO_MANY_PIXELS as exc:
        raise ImageTooLarge(
            f"the image claims more than {MAX_IMAGE_PIXELS // 1_000_000} megapixels, the "
            f"limit ({_first_line(exc)})"
        ) from exc
    except UNREADABLE as exc:
        raise NotAnImage(f"not a photo Pillow reads ({_first_line(exc)})") from exc
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageTooLarge(
            f"the image is {width}×{height} pixels ({width * height / 1e6:.0f} megapixels); "
            f"the limit is {MAX_IMAGE_PIXELS // 1_000_000} megapixels"
        )
    return image


def _decoded(image: Image.Image, max_side: int) -> Image.Image:
    """The first frame decoded at a reduced size, upright, as RGB. Reduced to twice
    ``max_side`` only: palette images are reduced by nearest neighbour, so the last step,
    from there to ``max_side``, resamples properly (:func:`downscale`)."""
    try:
        image.draft("RGB", _fitted(image.size, max_side))  # JPEG: decoded at 1/2, 1/4, 1/8
        image.thumbnail((2 * max_side, 2 * max_side))  # decodes the current (first) frame
        return ImageOps.exif_transpose(image).convert("RGB")
    except TOO_MANY_PIXELS as exc:  # a frame larger than the header said
        raise ImageTooLarge(_first_line(exc)) from exc
    except UNREADABLE as exc:
        raise NotAnImage(f"the image could not be decoded ({_first_line(exc)})") from exc


def _fitted(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """``size`` scaled to fit ``max_side`` (never enlarged): the least a draft must keep."""
    width, height = size
    scale = min(1.0, max_side / max(width, height, 1))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


async def image_url(data: bytes, max_side: int, max_bytes: int) -> str:
    """An image part's URL for ``data``, downscaled off the event loop."""
    loop = asyncio.get_running_loop()
    jpeg = await loop.run_in_executor(_image_threads, downscale, data, max_side, max_bytes)
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")

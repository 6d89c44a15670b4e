"""Photos made small enough for a model: downscaled to a maximum side and byte size, as JPEG.

A phone photo is 3-12 MB; a vision model reads a 1024-pixel one just as well, and every byte
is paid for in tokens and upload time. Pillow does the work (in a thread: it is CPU work).
The result is a ``data:`` URL for an image part; nothing is written to disk.
"""

from __future__ import annotations

import asyncio
import base64
import io

from PIL import Image, ImageOps, UnidentifiedImageError

QUALITIES = (85, 70, 55, 40)
"""JPEG qualities tried in turn until the image fits the byte limit."""
SHRINK_STEP = 0.75


class NotAnImage(ValueError):
    """The bytes are no image Pillow can read."""


def downscale(data: bytes, max_side: int, max_bytes: int) -> bytes:
    """``data`` as a JPEG no wider or taller than ``max_side`` and no bigger than
    ``max_bytes`` (the side shrinks further if the quality alone cannot get there)."""
    try:
        opened = Image.open(io.BytesIO(data))
        opened.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise NotAnImage(str(exc)) from exc
    image = ImageOps.exif_transpose(opened).convert("RGB")
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


async def image_url(data: bytes, max_side: int, max_bytes: int) -> str:
    """An image part's URL for ``data``, downscaled off the event loop."""
    jpeg = await asyncio.to_thread(downscale, data, max_side, max_bytes)
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")

"""Hostile images for the tests, written byte by byte: PNGs whose header claims millions of
pixels in a few kilobytes, GIFs that claim a huge screen or a huge second frame, PNGs with a
text chunk over Pillow's limits. Each is a valid file a decoder would really work through."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ROWS_PER_BLOCK = 1000
"""Rows compressed at a time, so a huge image never sits uncompressed in the test's memory."""


def chunk(kind: bytes, body: bytes) -> bytes:
    """One PNG chunk: length, type, data and CRC."""
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def huge_png(width: int, height: int, *, level: int = 9, after_idat: bytes = b"") -> bytes:
    """A white 1-bit greyscale PNG of ``width`` x ``height``: 13000 x 13000 is ~20 kB on
    disk and 169 MB once decoded (three times that as RGB). ``after_idat``: chunks placed
    between the image data and the end."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\0" + b"\xff" * ((width + 7) // 8)  # filter byte 0, then the pixels: white
    packer = zlib.compressobj(level)
    parts = []
    for start in range(0, height, ROWS_PER_BLOCK):
        parts.append(packer.compress(row * min(ROWS_PER_BLOCK, height - start)))
    parts.append(packer.flush())
    return (
        PNG_SIGNATURE
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", b"".join(parts))
        + after_idat
        + chunk(b"IEND", b"")
    )


def text_bomb_png(*, before_idat: bool) -> bytes:
    """A 64 x 64 PNG with a zTXt chunk of 2 kB that inflates to 2 MB, over Pillow's
    ``MAX_TEXT_CHUNK`` (1 MB), before or after its image data."""
    text = chunk(b"zTXt", b"Comment\0\0" + zlib.compress(b"a" * 2_000_000, 9))
    small = huge_png(64, 64)
    if not before_idat:
        return huge_png(64, 64, after_idat=text)
    idat = small.index(b"IDAT") - 4
    return small[:idat] + text + small[idat:]


ONE_PIXEL_LZW = b"\x02\x02\x44\x01\x00"
"""Minimum code size 2, then one sub-block that paints one pixel of colour 0."""


def _gif_frame(width: int, height: int) -> bytes:
    return b"," + struct.pack("<HHHHB", 0, 0, width, height, 0) + ONE_PIXEL_LZW


def huge_screen_gif(width: int = 65535, height: int = 65535) -> bytes:
    """A GIF of one pixel whose header claims a ``width`` x ``height`` screen (4.3 billion
    pixels at the most a GIF can claim)."""
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\0\0\0\xff\xff\xff"
    return b"GIF89a" + screen + _gif_frame(1, 1) + b";"


def gif_with_huge_second_frame() -> bytes:
    """A one-pixel GIF animation whose second frame claims 60000 x 60000 pixels: harmless
    as long as nothing reads past the first frame."""
    screen = struct.pack("<HHBBB", 1, 1, 0x80, 0, 0) + b"\0\0\0\xff\xff\xff"
    return b"GIF89a" + screen + _gif_frame(1, 1) + _gif_frame(60000, 60000) + b";"


def encoded(image: Image.Image, fmt: str, **params: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()

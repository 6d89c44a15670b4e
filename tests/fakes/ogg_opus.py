"""Small, valid OGG/Opus files made in pure Python, and a reader that checks them.

The fake speech endpoint answers with one of these, and the fake Telegram accepts a voice
note only if it is one (as Telegram plays only OGG/Opus as a voice bubble). The audio is
silence: each packet is a 20 ms CELT frame that decoders read as digital silence.

The container follows RFC 3533 (pages, lacing, the CRC-32 with polynomial 0x04C11DB7) and
the Opus mapping of RFC 7845 (an ``OpusHead`` page, an ``OpusTags`` page, then audio pages
whose granule position counts 48 kHz samples).
"""

from __future__ import annotations

import functools
import struct

SAMPLE_RATE = 48_000
FRAME_SAMPLES = 960
"""20 ms at 48 kHz."""
SILENT_FRAME = b"\xf8\xff\xfe"
"""TOC 0xF8 (CELT fullband, 20 ms, mono, one frame) and a frame that decodes to silence."""
PRE_SKIP = 312
PACKETS_PER_PAGE = 50


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        table.append(crc & 0xFFFFFFFF)
    return table


_CRC = _crc_table()


def ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC[((crc >> 24) & 0xFF) ^ byte]
    return crc


def _page(packets: list[bytes], granule: int, serial: int, sequence: int, flags: int) -> bytes:
    lacing = bytearray()
    for packet in packets:
        size = len(packet)
        lacing += b"\xff" * (size // 255) + bytes([size % 255])
    header = struct.pack("<4sBBqIIIB", b"OggS", 0, flags, granule, serial, sequence, 0, len(lacing))
    page = bytearray(header + bytes(lacing) + b"".join(packets))
    struct.pack_into("<I", page, 22, ogg_crc(bytes(page)))
    return bytes(page)


@functools.lru_cache(maxsize=64)
def make_ogg_opus(seconds: float = 1.0, serial: int = 0x5EED) -> bytes:
    """A mono OGG/Opus file of ``seconds`` of silence (made once per length: the fakes
    answer with it, and a fake should cost no time)."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, PRE_SKIP, SAMPLE_RATE, 0, 0)
    vendor = b"companion-gateway tests"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    pages = [_page([head], 0, serial, 0, 0x02), _page([tags], 0, serial, 1, 0)]
    frames = max(1, round(seconds * SAMPLE_RATE / FRAME_SAMPLES))
    sequence, written = 2, 0
    while written < frames:
        count = min(PACKETS_PER_PAGE, frames - written)
        written += count
        last = written == frames
        granule = PRE_SKIP + written * FRAME_SAMPLES
        pages.append(_page([SILENT_FRAME] * count, granule, serial, sequence, 0x04 if last else 0))
        sequence += 1
    return b"".join(pages)


class NotOggOpus(ValueError):
    """The bytes are not an OGG/Opus stream."""


def ogg_opus_seconds(data: bytes) -> float:
    """The duration of an OGG/Opus file; raises NotOggOpus for anything else (a bad page, a
    wrong CRC, a first packet that is not ``OpusHead``)."""
    offset, first_packet, granule = 0, None, 0
    while offset < len(data):
        if data[offset : offset + 4] != b"OggS" or len(data) < offset + 27:
            raise NotOggOpus(f"no OGG page at byte {offset}")
        segments = data[offset + 26]
        lacing = data[offset + 27 : offset + 27 + segments]
        body = offset + 27 + segments
        end = body + sum(lacing)
        page = bytearray(data[offset:end])
        if len(page) != end - offset:
            raise NotOggOpus("truncated OGG page")
        stored = struct.unpack_from("<I", page, 22)[0]
        struct.pack_into("<I", page, 22, 0)
        if ogg_crc(bytes(page)) != stored:
            raise NotOggOpus(f"bad CRC in the OGG page at byte {offset}")
        if first_packet is None:
            first_packet = data[body:end]
        granule = max(granule, struct.unpack_from("<q", data, offset + 6)[0])
        offset = end
    if first_packet is None or not first_packet.startswith(b"OpusHead"):
        raise NotOggOpus("the stream is not Opus (no OpusHead)")
    pre_skip = struct.unpack_from("<H", first_packet, 10)[0]
    return max(0, granule - pre_skip) / SAMPLE_RATE

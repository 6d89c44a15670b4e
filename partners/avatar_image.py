"""A card's picture as the partner's ``avatar.png``, whatever image it came as.

A CHARX card's icon may be a JPEG, WebP or GIF, and RisuAI's JPEG card is a JPEG: the partner's
avatar is a PNG (a PNG card is exported from it), so such a picture is decoded and written
again as PNG. It is a stranger's image decoded in this process, so only the formats front-ends
write are opened, and the pixel count its header claims is checked before any pixel is decoded;
the picture is made no larger than an avatar needs. A PNG small enough is kept byte for byte
(card chunks taken out). A picture that does not read costs the avatar, never the import: the
owner is told.
"""

from __future__ import annotations

import io
import struct

from partners.card_format import PNG_SIGNATURE, CardError, png_image
from partners.persona import MAX_AVATAR_BYTES

MAX_ICON_PIXELS = 40_000_000
"""The most pixels a card's picture may claim before it is decoded (a 40-megapixel image costs
at most 160 MB while it is converted)."""
AVATAR_SIDE = 1024
"""A converted picture's longest side: chat apps show avatars far smaller."""
ICON_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")


def avatar_png(data: bytes, where: str, notes: list[str]) -> bytes | None:
    """``data`` as the avatar PNG, or None with a note in ``notes`` saying why not."""
    if data.startswith(PNG_SIGNATURE) and len(data) <= MAX_AVATAR_BYTES:
        try:
            return png_image(data, where)
        except CardError as exc:
            notes.append(f"{exc}; no avatar")
            return None
    try:
        return _converted(data)
    except _Unreadable as exc:
        notes.append(f"{where}: {exc}; no avatar")
        return None


class _Unreadable(ValueError):
    pass


def _converted(data: bytes) -> bytes:
    from PIL import Image  # only a card whose picture is not a PNG needs it

    unreadable = (OSError, ValueError, SyntaxError, EOFError, struct.error)
    bombs = (Image.DecompressionBombError, Image.DecompressionBombWarning)
    try:
        image = Image.open(io.BytesIO(data), formats=ICON_FORMATS)
        width, height = image.size
        if width * height > MAX_ICON_PIXELS:
            raise _Unreadable(
                f"a picture of {width}×{height} pixels, over the limit of "
                f"{MAX_ICON_PIXELS // 1_000_000} megapixels"
            )
        image.draft("RGB", (AVATAR_SIDE, AVATAR_SIDE))  # a JPEG is decoded at a reduced scale
        image.thumbnail((AVATAR_SIDE, AVATAR_SIDE))
        converted = image.convert("RGBA" if "A" in image.getbands() else "RGB")
        out = io.BytesIO()
        converted.save(out, format="PNG")
    except bombs as exc:
        raise _Unreadable(f"a picture over the pixel limit ({_first_line(exc)})") from None
    except unreadable as exc:
        raise _Unreadable(f"not a picture that reads ({_first_line(exc)})") from None
    return out.getvalue()


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__

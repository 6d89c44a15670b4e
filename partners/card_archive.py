"""CHARX character files: a zip holding ``card.json`` and the card's assets (``assets/…``), as
RisuAI writes it and SillyTavern reads it, and RisuAI's JPEG form (the card's picture with the
zip appended after it).

Read as SillyTavern reads it: ``card.json`` (at the root, else the first member whose name
ends so, outside ``__MACOSX``) must be a card with a ``spec``; the card's ``assets`` list names
its files by ``embeded://`` (RisuAI's spelling), ``embedded://`` or ``__asset:`` paths; the
``icon`` asset named ``main`` (else the first icon) is the avatar, and the other assets the
card lists are kept with the partner under ``assets/``. A listed asset the zip lacks is
skipped and named; ``module.risum`` (RisuAI's own module format) is named and not read.

A zip is a stranger's archive, so before anything is inflated: the end record may name at most
:data:`MAX_MEMBERS` files and a central directory of at most :data:`MAX_DIRECTORY_BYTES`
(ZIP64 is refused: a card needs none); every name must be a plain relative path (no ``/`` or
drive at the start, no ``..``, no backslash, no control character); only stored and deflated,
unencrypted members are read; what the members declare must fit :data:`MAX_UNCOMPRESSED_BYTES`
in all, each no more than its own limit and none a thousand-fold inflation of a tiny member.
Reading then stops at the declared size, whatever the data holds (the checksum then fails).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass

from partners.avatar_image import avatar_png
from partners.card_format import (
    FIX_CARD,
    MAX_CARD_FILE_BYTES,
    MAX_CARD_JSON_BYTES,
    Card,
    CardError,
    card_from_document,
    parse_json,
)

MAX_MEMBERS = 2_000
"""Files in one CHARX: a card with a few hundred expression pictures fits."""
MAX_DIRECTORY_BYTES = 1024 * 1024
"""The zip's central directory (its list of files) is read whole by the zip reader: a megabyte
names the most files allowed with long names; a small file cannot claim a huge list."""
MAX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024
"""All members together, as declared, before any is inflated."""
MAX_ASSET_BYTES = MAX_CARD_FILE_BYTES
MAX_RATIO = 1_000
BOMB_FLOOR = 1024 * 1024
"""A member that declares more than this and over :data:`MAX_RATIO` times its compressed size
is a zip bomb: deflate itself cannot do better than about 1,032 to one."""
READ_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
CARD_MEMBER = "card.json"
EMBEDDED = ("embeded://", "embedded://", "__asset:")
IMAGE_EXTENSIONS = {"png", "jpg", "jpeg", "webp", "gif", "apng", "avif", "bmp", "jfif"}
ASSETS = "assets/"
RISU_MODULE = "module.risum"
END_RECORD = b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
MAX_NAME_CHARS = 400
UNREADABLE_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, struct.error)


@dataclass(frozen=True)
class Asset:
    path: str
    """The member the card names (normalized as SillyTavern does)."""
    kind: str
    name: str
    ext: str


def read_charx(raw: bytes, filename: str, jpeg: bool = False) -> Card:
    """The card in a CHARX zip (``jpeg``: RisuAI's JPEG with the zip after it)."""
    archive, by_name = _members(raw, filename)
    card_info = _card_member(by_name, filename)
    text = _read(archive, card_info, MAX_CARD_JSON_BYTES, filename)
    where = f"{filename}: {card_info.filename}"
    document = parse_json(text, where, MAX_CARD_JSON_BYTES, FIX_CARD)
    if not isinstance(document, dict) or "spec" not in document:
        raise CardError(f"{where}: not a card with a 'spec' (V2 or V3), as a CHARX must hold")
    card = card_from_document(document, where)
    assets = _listed_assets(card.data.get("assets"))
    icon = _icon(assets)
    notes: list[str] = []
    image = None
    if icon is not None and icon.path in by_name:
        found = _read(archive, by_name[icon.path], MAX_ASSET_BYTES, filename)
        image = avatar_png(found, f"{filename}: {icon.path}", notes)
    elif icon is not None:  # as SillyTavern: the main icon or none, never another one
        notes.append(f"the main icon ({icon.path[:80]}) is not in the zip; no avatar")
    elif jpeg:  # no icon inside: the picture the zip came in is the card's own
        start = min(info.header_offset for info in by_name.values())
        image = avatar_png(raw[:start], f"{filename}: the JPEG", notes)
    kept = _kept(archive, by_name, [a for a in assets if a != icon], filename, notes)
    if RISU_MODULE in by_name:
        notes.append(f"{RISU_MODULE} (RisuAI's module: its lorebook and scripts) is not read")
    spec = f"{card.spec} CHARX in a JPEG" if jpeg else f"{card.spec} CHARX"
    return Card(card.data, image, spec, kept, tuple(notes))


def _members(raw: bytes, filename: str) -> tuple[zipfile.ZipFile, dict[str, zipfile.ZipInfo]]:
    """The archive and its files by name (the first of a name wins), every bound checked."""
    _check_end_record(raw, filename)
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except UNREADABLE_ZIP as exc:
        raise CardError(f"{filename}: not a readable CHARX zip ({_first_line(exc)})") from None
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise _too_many(filename, len(infos))
    total = 0
    by_name: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        _check_member(info, filename)
        total += info.file_size
        if total > MAX_UNCOMPRESSED_BYTES:
            raise CardError(
                f"{filename}: the zip unpacks to more than {MAX_UNCOMPRESSED_BYTES:,} bytes, "
                "the limit for a CHARX card"
            )
        if not info.is_dir():
            by_name.setdefault(info.filename, info)
    return archive, by_name


def _check_end_record(raw: bytes, filename: str) -> None:
    """What the zip's end record claims, checked before the zip reader believes it."""
    at = raw.rfind(END_RECORD, max(0, len(raw) - 22 - 65_535))
    if at < 0 or at + 22 > len(raw):
        raise CardError(f"{filename}: not a readable CHARX zip (no end of central directory)")
    entries, directory_bytes = struct.unpack("<HI", raw[at + 10 : at + 16])
    if raw[max(0, at - 20) : at - 16] == ZIP64_LOCATOR or entries == 0xFFFF:
        raise CardError(f"{filename}: a ZIP64 archive; a CHARX card is an ordinary zip")
    if entries > MAX_MEMBERS:
        raise _too_many(filename, entries)
    if directory_bytes > MAX_DIRECTORY_BYTES:
        raise CardError(
            f"{filename}: the zip's list of files takes {directory_bytes:,} bytes, over the "
            f"limit of {MAX_DIRECTORY_BYTES:,}"
        )


def _too_many(filename: str, count: int) -> CardError:
    return CardError(
        f"{filename}: the zip holds {count:,} files, over the limit of {MAX_MEMBERS:,} "
        "for a CHARX card"
    )


def _check_member(info: zipfile.ZipInfo, filename: str) -> None:
    name = info.filename
    where = f"{filename}: member {name[:80]!r}"
    if not _plain_path(name):
        raise CardError(f"{where} is not a plain relative path; the zip is refused")
    if info.is_dir():
        return
    if info.flag_bits & 0x1:
        raise CardError(f"{where} is encrypted; a CHARX card is not")
    if info.compress_type not in READ_METHODS:
        raise CardError(f"{where} is compressed with method {info.compress_type}; CHARX "
                        "members are stored or deflated")  # fmt: skip
    if info.file_size > BOMB_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        raise CardError(
            f"{where} claims {info.file_size:,} bytes from {info.compress_size:,}: a zip "
            "bomb, refused"
        )


def _plain_path(name: str) -> bool:
    """A relative path inside the archive: nothing that could climb out of a folder or name
    a drive, root or device."""
    if not name or len(name) > MAX_NAME_CHARS or "\\" in name:
        return False
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return False
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        return False
    parts = name.rstrip("/").split("/")
    return all(part not in ("", ".", "..") for part in parts)


def _card_member(by_name: dict[str, zipfile.ZipInfo], filename: str) -> zipfile.ZipInfo:
    if CARD_MEMBER in by_name:
        return by_name[CARD_MEMBER]
    for name, info in by_name.items():
        if name.endswith(f"/{CARD_MEMBER}") and not name.startswith("__MACOSX"):
            return info
    raise CardError(f"{filename}: a zip without a {CARD_MEMBER}, so not a CHARX card")


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, filename: str) -> bytes:
    """A member's bytes: no more than it declared, nor than ``limit``."""
    where = f"{filename}: member {info.filename[:80]!r}"
    if info.file_size > limit:
        raise CardError(f"{where} is {info.file_size:,} bytes, over the limit of {limit:,}")
    try:
        with archive.open(info) as member:
            data = member.read(info.file_size + 1)
    except UNREADABLE_ZIP as exc:
        raise CardError(f"{where} does not unpack ({_first_line(exc)})") from None
    if len(data) != info.file_size:
        raise CardError(f"{where} unpacks to another size than it declares; the zip is damaged")
    return data


def _listed_assets(listed: object) -> list[Asset]:
    """The card's assets that name a file in the zip, in their order."""
    found = []
    for entry in listed if isinstance(listed, list) else []:
        uri = entry.get("uri") if isinstance(entry, dict) else None
        if not isinstance(uri, str):
            continue
        prefix = next((p for p in EMBEDDED if uri.strip().lower().startswith(p)), None)
        if prefix is None:
            continue
        path = uri.strip()[len(prefix) :].replace("\\", "/")
        path = path.removeprefix("./") if path.startswith("./") else path.removeprefix("/")
        ext = str(entry.get("ext") or "").strip().lower().removeprefix(".")
        ext = ext or (path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else "")
        kind, name = entry.get("type"), entry.get("name")
        kind = kind.lower() if isinstance(kind, str) else ""
        found.append(Asset(path, kind, name if isinstance(name, str) else "", ext))
    return found


def _icon(assets: list[Asset]) -> Asset | None:
    icons = [a for a in assets if a.kind == "icon" and a.ext in IMAGE_EXTENSIONS and a.path]
    return next((a for a in icons if a.name.lower() == "main"), icons[0] if icons else None)


def _kept(
    archive: zipfile.ZipFile,
    by_name: dict[str, zipfile.ZipInfo],
    assets: list[Asset],
    filename: str,
    notes: list[str],
) -> dict[str, bytes]:
    """The other listed assets, by the name they take in the partner (``assets/…``)."""
    kept: dict[str, bytes] = {}
    for asset in assets:
        info = by_name.get(asset.path)
        if info is None:
            notes.append(f"asset {asset.name[:60]!r} ({asset.path[:80]}) is not in the zip")
            continue
        target = info.filename if info.filename.startswith(ASSETS) else ASSETS + info.filename
        if target not in kept:
            kept[target] = _read(archive, info, MAX_ASSET_BYTES, filename)
    return kept


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__

"""What a turn does with the voice notes and photos among its messages, before the model runs.

A message arrives stored with its platform file id (``bot/store/media.py``, table ``media``), never
its bytes, so a crash before this point loses nothing: the turn runs again and so does this.

* **Voice** (voice and audio notes, video notes): downloaded, transcribed through
  ``[speech]`` and the transcript, cut where typed text is (``bot/turn/media_limits.py``),
  becomes the message's text of record (history, search, review, export), marked as
  spoken. The audio is dropped unless ``speech.keep_audio`` (then ``audio/<message
  id><suffix>``, the suffix short and safe whatever the sender called the file). A voice
  note that cannot be transcribed (speech unset or failing) keeps its caption, if any;
  without one it is *unheard* and the turn answers with one polite line instead.
* **Photos**: for a partner whose model sees (preset.yml ``vision: true`` or ``llm.vision``)
  they become image parts of this turn's request only, downscaled (``bot/turn/images.py``); else
  ``llm.vision_model`` writes a short description that becomes part of the text; else the
  model is told a photo came that it cannot see, and answers that in its own voice. A photo
  that cannot be fetched or opened (``bot/turn/images.py`` refuses image bombs and damaged files
  before decoding them) is marked failed, and the model is told it would not open: the
  message, its caption, is still answered.

Only the pending messages of the turn are read here — one user's conversation — so one
user's photo can never reach another user's request.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import cast

from adapters.base import Channel, DeliveryError, MediaChannel, MediaTooBig
from bot.config.model import Config
from bot.services.llm import LLMClient, LLMError
from bot.services.speech import SpeechClient, SpeechError
from bot.store import MediaRow, MessageRow, Store
from bot.turn.media_limits import cut_text
from partners.persona import Partner

logger = logging.getLogger(__name__)

VOICE_KINDS = ("voice",)
PHOTO = "photo"
NEW, DONE, FAILED = "new", "done", "failed"
SPOKEN_NOTE = "voice message"
PHOTO_NOTE = "photo"
UNSEEN_PHOTO_NOTE = "a photo you cannot see: say kindly that you cannot see images"
UNOPENED_PHOTO_NOTE = (
    "a photo that could not be opened: say kindly that it would not open, and answer the rest"
)
DESCRIBED = "[photo: {description}]"
SAFE_SUFFIX = re.compile(r"\.[a-z0-9]{1,8}")
"""A sender's file name gives its suffix to the upload and the kept file only if it is
this short and plain (a name is the sender's to choose: 300 characters, slashes, spaces)."""
AUDIO_SUFFIXES = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/aac": ".m4a",
    "video/mp4": ".mp4",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/webm": ".webm",
    "video/webm": ".webm",
    "audio/flac": ".flac",
}
"""The suffix a transcription endpoint tells the format by, from the MIME type, when the
file name gives none that is safe."""
DEFAULT_AUDIO_SUFFIX = ".ogg"


def describe_prompt() -> str:
    return (resources.files("partners") / "prompts" / "describe_image.md").read_text("utf-8")


@dataclass(frozen=True)
class Spent:
    """Usage a turn's media cost: units (seconds heard, images seen) or tokens (a description)."""

    kind: str
    model: str
    units: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Prepared:
    """The pending messages as the model will see them."""

    rows: list[MessageRow]
    notes: dict[int, str] = field(default_factory=dict)
    """Message id -> how the message is marked for the model (spoken, a photo, ...)."""
    images: dict[int, list[str]] = field(default_factory=dict)
    """Message id -> image part URLs, for this turn's request only."""
    unheard: list[MessageRow] = field(default_factory=list)
    """Voice notes without words: not transcribed, and no caption to answer instead."""
    spoken: bool = False
    """The newest message was spoken (a voice reply fits, in /voice auto)."""
    partner_dir: Path | None = None
    """Where ``speech.keep_audio`` keeps voice notes (the partner's directory)."""
    spent: list[Spent] = field(default_factory=list)
    """What reading the media cost, for the turn to book."""
    states: dict[tuple[int, str, str], str] = field(default_factory=dict)
    """States this reading gave the media (as stored)."""


async def book(store: Store, day: str, partner_id: str, spent: list[Spent]) -> None:
    """What reading a turn's media cost, into the usage table: tokens (a description), or
    units (seconds heard, images seen)."""
    for item in spent:
        if item.prompt_tokens or item.completion_tokens:
            await store.add_usage(
                day, partner_id, item.kind, item.model, item.prompt_tokens, item.completion_tokens
            )
        else:
            await store.add_units(day, partner_id, item.kind, item.model, item.units)


class MediaReader:
    def __init__(
        self,
        config: Config,
        store: Store,
        speech: SpeechClient,
        llm: LLMClient,
        channels: dict[str, Channel],
    ) -> None:
        self.config = config
        self.store = store
        self.speech = speech
        self.llm = llm
        self.channels = channels

    def sees_images(self, partner: Partner | None) -> bool:
        wanted = partner.preset.extra.get("vision") if partner is not None else None
        return bool(wanted) if wanted is not None else self.config.llm.vision

    @staticmethod
    def notes(rows: list[MessageRow], media: dict[int, list[MediaRow]]) -> dict[int, str]:
        """How earlier messages are marked for the model (history: spoken, photos), from the
        media of the turn's context (which may hold other messages' too)."""
        notes = {row.id: _note(media.get(row.id, []), sees=True) for row in rows}
        return {mid: note for mid, note in notes.items() if note}

    async def prepare(
        self,
        platform: str,
        partner: Partner | None,
        pending: list[MessageRow],
        media: dict[int, list[MediaRow]],
    ) -> Prepared:
        """Transcribe, describe or attach the media of ``pending`` (``media``: theirs, as the
        turn's context read them, other messages' too); see the module docstring. Turns of
        different chats run side by side: everything of one reading is in its
        :class:`Prepared`, nothing in the reader."""
        prepared = Prepared([], partner_dir=partner.dir if partner is not None else None)
        for row in pending:
            items = media.get(row.id, [])
            for item in items:
                row = await self._read(platform, partner, row, item, prepared)
            if any(r.id == row.id for r in prepared.unheard):
                continue
            items = [replace(i, state=prepared.states.get(_key(i), i.state)) for i in items]
            if note := _note(items, self.sees_images(partner)):
                prepared.notes[row.id] = note
            prepared.rows.append(row)
        prepared.spoken = SPOKEN_NOTE in prepared.notes.get(pending[-1].id, "")
        return prepared

    async def _read(
        self,
        platform: str,
        partner: Partner | None,
        row: MessageRow,
        item: MediaRow,
        prepared: Prepared,
    ) -> MessageRow:
        if item.kind in VOICE_KINDS and item.state == NEW:
            return await self._hear(platform, row, item, prepared)
        if item.kind == PHOTO and item.state != FAILED:
            return await self._see(platform, partner, row, item, prepared)
        return row

    async def _set_state(self, item: MediaRow, state: str, prepared: Prepared) -> None:
        await self.store.set_media_state(item.message_id, item.kind, item.ref, state)
        prepared.states[_key(item)] = state

    # ---- voice -------------------------------------------------------------------------

    async def _hear(
        self, platform: str, row: MessageRow, item: MediaRow, prepared: Prepared
    ) -> MessageRow:
        transcript = await self._transcribe(platform, row, item, prepared)
        if transcript is None:
            await self._set_state(item, FAILED, prepared)
            if not row.text.strip():
                prepared.unheard.append(row)
            return row
        text = f"{transcript}\n\n{row.text}".strip() if row.text.strip() else transcript
        await self.store.set_message_text(row.id, text, (item.kind, item.ref, DONE))
        prepared.states[_key(item)] = DONE
        return _with_text(row, text)

    async def _transcribe(
        self, platform: str, row: MessageRow, item: MediaRow, prepared: Prepared
    ) -> str | None:
        if not self.speech.can_transcribe:
            return None
        audio = await self._download(platform, item)
        if audio is None:
            return None
        suffix = kept_suffix(item.filename, item.mime)
        try:
            transcript = await self.speech.transcribe(audio, f"voice{suffix}", item.mime)
        except SpeechError as exc:
            logger.warning("voice note %d not transcribed: %s", row.id, exc)
            return None
        prepared.spent.append(
            Spent("transcription", self.speech.config.stt_model or "", item.seconds or 0)
        )
        if self.speech.config.keep_audio:
            folder = audio_dir(prepared.partner_dir or Path(self.config.data_dir))
            await asyncio.to_thread(_keep, folder / f"{row.id}{suffix}", audio)
        return cut_text(transcript) or "…"

    # ---- photos ------------------------------------------------------------------------

    async def _see(
        self,
        platform: str,
        partner: Partner | None,
        row: MessageRow,
        item: MediaRow,
        prepared: Prepared,
    ) -> MessageRow:
        sees = self.sees_images(partner)
        if not sees and (not self.config.llm.vision_model or item.state == DONE):
            return row
        data = await self._download(platform, item)
        url = await self._image_url(row, data) if data is not None else None
        if url is None:
            await self._set_state(item, FAILED, prepared)
            return row
        if sees:
            prepared.spent.append(Spent("image", self.config.llm.model, 1))
            prepared.images.setdefault(row.id, []).append(url)
            return row
        description = await self._describe(url, prepared)
        if description is None:
            return row
        text = DESCRIBED.format(description=description)
        text = f"{text}\n{row.text}".strip()
        await self.store.set_message_text(row.id, text, (item.kind, item.ref, DONE))
        prepared.states[_key(item)] = DONE
        return _with_text(row, text)

    async def _image_url(self, row: MessageRow, data: bytes) -> str | None:
        llm = self.config.llm
        # Pillow (2 MB resident) loads with the first photo, in a thread: most gateways
        # never get one, and the import reads files the event loop need not wait for
        images = await asyncio.to_thread(importlib.import_module, "bot.turn.images")
        try:
            return cast(str, await images.image_url(data, llm.image_max_side, llm.image_max_bytes))
        except images.NotAnImage as exc:
            logger.warning("photo of message %d refused: %s", row.id, exc)
            return None

    async def _describe(self, url: str, prepared: Prepared) -> str | None:
        model = self.config.llm.vision_model
        content = [
            {"type": "text", "text": describe_prompt()},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        try:
            completion = await self.llm.complete(
                [{"role": "user", "content": content}], model=model
            )
        except LLMError as exc:
            logger.warning("photo not described by %s: %s", model, exc)
            return None
        usage = completion.usage
        prepared.spent.append(
            Spent("image", completion.model, 1, usage.prompt_tokens, usage.completion_tokens)
        )
        return " ".join(completion.text.split()) or None

    # ---- downloads ---------------------------------------------------------------------

    async def _download(self, platform: str, item: MediaRow) -> bytes | None:
        channel = self.channels.get(platform)
        if not isinstance(channel, MediaChannel):
            return None
        try:
            return await channel.download(item.ref)
        except (MediaTooBig, DeliveryError) as exc:
            logger.warning("%s %s not downloaded: %s", item.kind, item.ref, exc)
            return None


def _note(items: list[MediaRow], sees: bool) -> str:
    """How a message with these media is marked for the model. A photo nobody described,
    for a partner that cannot see, is named as such so that it answers kindly; so is a
    photo that could not be fetched or opened (a damaged file, an image bomb)."""
    notes = []
    for item in items:
        if item.kind in VOICE_KINDS and item.state == DONE:
            notes.append(SPOKEN_NOTE)
        elif item.kind == PHOTO and item.state == FAILED:
            notes.append(UNOPENED_PHOTO_NOTE)
        elif item.kind == PHOTO:
            notes.append(PHOTO_NOTE if sees or item.state == DONE else UNSEEN_PHOTO_NOTE)
    return ", ".join(notes)


def audio_dir(owner_dir: Path) -> Path:
    """Where kept voice notes live: ``audio/<message id>.<ext>`` in the partner's directory
    (the data directory for the owner's assistant), so /forget finds them."""
    return owner_dir / "audio"


def kept_suffix(filename: str | None, mime: str | None) -> str:
    """The suffix a voice note is uploaded and kept under: its file name's, lower-cased, if
    short and plain; else its MIME type's; else ``.ogg`` (Telegram's voice notes)."""
    suffix = Path(filename or "").suffix.lower()
    if SAFE_SUFFIX.fullmatch(suffix):
        return suffix
    return AUDIO_SUFFIXES.get((mime or "").split(";")[0].strip().lower(), DEFAULT_AUDIO_SUFFIX)


def _keep(path: Path, audio: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(audio)


def delete_kept_audio(folder: Path) -> tuple[int, int]:
    """Delete every voice note kept in ``folder`` (see :func:`audio_dir`); returns how many
    files and bytes went."""
    if not folder.is_dir():
        return 0, 0
    files = size = 0
    for path in folder.iterdir():
        if path.is_file() and not path.is_symlink():
            size += path.stat().st_size
            path.unlink(missing_ok=True)
            files += 1
    return files, size


def _key(item: MediaRow) -> tuple[int, str, str]:
    return item.message_id, item.kind, item.ref


def _with_text(row: MessageRow, text: str) -> MessageRow:
    return replace(row, text=text)

"""A fake Telegram Bot API server for end-to-end tests.

The real python-telegram-bot client talks to it over HTTP on 127.0.0.1::

    async with FakeTelegram() as fake:
        app = (
            Application.builder()
            .token(TOKEN)
            .base_url(fake.base_url)
            .base_file_url(fake.base_file_url)
            .build()
        )
        ...
        fake.send_user_message(chat_id=1001, text="hello")
        [reply] = await fake.wait_for_sent(chat_id=1001)

What it does, as Telegram does:

* ``/bot{token}/{method}`` with case-insensitive method names; a wrong token gets 401, an
  unknown method 404.  Bodies may be query strings, form-urlencoded, multipart (files) or JSON;
  every form value is JSON-decoded when possible (python-telegram-bot JSON-encodes every
  non-string value), except for parameters that are always strings (``text``, ``caption``, ...).
* Several bots: :meth:`FakeTelegram.add_bot` makes another token known (a bot of its own:
  ``getMe`` answers with it, its sends come ``from`` it and only it may edit them;
  ``Call.bot_id`` says which bot made each call).  Updates are the main bot's: another bot's
  ``getUpdates`` is held for its timeout and gets none, and, as on Telegram, no bot receives
  what another bot sends.  ``non_member_chats`` lists (bot id, chat id) pairs where a bot is
  not a member: its sends there get 403.
* ``getUpdates`` is a real long poll: it is held open for ``timeout`` seconds and answered as
  soon as an update is pushed.  Updates below ``offset`` are confirmed and dropped for good;
  a newer ``getUpdates`` terminates a pending one with 409; while a webhook is set
  ``getUpdates`` gets 409.  Update types outside ``allowed_updates`` are never delivered (the
  default leaves out ``chat_member``, ``message_reaction`` and ``message_reaction_count``).
* Message ids are allocated per chat, shared by user and bot messages.  Sends parse the parse
  mode as Telegram does (HTML into text and entities, ``tests/fakes/telegram_html.py``;
  MarkdownV2 reserved characters), check the 4096 character limit (of the visible text), replies
  to unknown messages, and reject ``message_thread_id=1`` (the General topic) in forums.
  Edits of unknown or unchanged messages fail like on Telegram ("message is not modified").
* Faults: :meth:`FakeTelegram.fail_next`, :meth:`FakeTelegram.reject_entities_once`,
  :meth:`FakeTelegram.delay_next`, :meth:`FakeTelegram.garble_next`,
  :meth:`FakeTelegram.hold_next`, ``fail_ratio``, ``stalled``, ``blocked_chats``,
  ``failing_chats`` and ``per_chat_limit``.
* Media: voice notes, audio files, video notes, photos (two sizes) and stickers (emoji and set
  name) come with files that ``getFile`` describes and the file URL serves; ``getFile`` refuses
  files over 20 MB ("file is too big", the limit for bots). ``sendVoice`` takes only OGG/Opus
  (checked page by page; anything else is refused, as Telegram would not show it as a voice
  bubble), ``sendSticker`` only a known file id, ``setMessageReaction`` only the emoji Telegram
  allows. :meth:`FakeTelegram.reaction_update` builds a ``message_reaction`` update.

Some error descriptions are Telegram's own wording; the ones Telegram does not document
(marked "fake's wording" below) only promise the status code and the ``Bad Request:`` prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import mimetypes
import random
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from telegram.constants import ReactionEmoji

from tests.fakes.ogg_opus import NotOggOpus, ogg_opus_seconds
from tests.fakes.telegram_html import HtmlError, decode_references, parse_html

__all__ = [
    "TOKEN",
    "ApiError",
    "Call",
    "FakeTelegram",
    "Hold",
    "REGISTERED_SECRET",
]

TOKEN = "123456:TEST-TOKEN"

T = TypeVar("T")

MAX_TEXT_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
"""Bots may download files up to 20 MB through getFile."""

# Update types Telegram leaves out unless they are asked for in ``allowed_updates``.
DEFAULT_EXCLUDED_UPDATES = frozenset({"chat_member", "message_reaction", "message_reaction_count"})

# Parameters that are strings in the Bot API: never JSON-decode them ("123" stays "123").
_STRING_PARAMS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "secret_token",
        "url",
        "action",
        "language_code",
        "callback_query_id",
        "inline_message_id",
        "ip_address",
        "title",
        "description",
        "short_description",
        "name",
        "query",
        "emoji",
        "file_id",
        "business_connection_id",
        "message_effect_id",
    }
)

_CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)

_ALLOWED_REACTIONS = frozenset(str(emoji.value) for emoji in ReactionEmoji)

_TAG_RE = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)>")
_COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")

_MEDIA_METHODS = {
    "senddocument": ("sendDocument", "document"),
    "sendphoto": ("sendPhoto", "photo"),
    "sendvoice": ("sendVoice", "voice"),
    "sendaudio": ("sendAudio", "audio"),
    "sendvideo": ("sendVideo", "video"),
    "sendanimation": ("sendAnimation", "animation"),
    "sendsticker": ("sendSticker", "sticker"),
}

_POLL_CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request: injected failure",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: _POLL_CONFLICT,
    500: "Internal Server Error",
    502: "Bad Gateway",
}

_WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)


class _Registered(enum.Enum):
    SECRET = "registered-secret"


REGISTERED_SECRET = _Registered.SECRET
"""Default of :meth:`FakeTelegram.post_webhook`: send the secret registered by setWebhook."""


class ApiError(Exception):
    """An error answer of the Bot API; raise it from a custom responder (see ``responders``)."""

    def __init__(
        self, status: int, description: str, parameters: dict[str, Any] | None = None
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


@dataclass
class Call:
    """One request the fake received, recorded when it arrives and completed when answered.

    ``status`` is None while the request is still being handled (a held ``getUpdates``), the
    HTTP status once answered, and 499 if the client went away first.  ``time`` is
    :func:`time.monotonic` at arrival.
    """

    method: str
    params: dict[str, Any]
    files: dict[str, tuple[str, bytes]]
    time: float
    status: int | None = None
    result: Any = None
    description: str | None = None
    http_method: str = "POST"
    bot_id: int | None = None
    """The bot whose token made the call (None: a token the fake does not know)."""

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def chat_id(self) -> Any:
        return self.params.get("chat_id")

    @property
    def text(self) -> str | None:
        value = self.params.get("text")
        return None if value is None else str(value)

    def summary(self) -> str:
        params = json.dumps(self.params, ensure_ascii=False, default=str)
        if len(params) > 200:
            params = params[:197] + "..."
        files = f" files={sorted(self.files)}" if self.files else ""
        status = "pending" if self.status is None else str(self.status)
        return f"{self.method} -> {status} {params}{files}"


@dataclass
class _Fault:
    kind: Literal["error", "garbage", "delay"]
    remaining: int
    status: int = 500
    description: str = ""
    parameters: dict[str, Any] | None = None
    delay: float = 0.0


@dataclass
class Hold:
    """A call :meth:`FakeTelegram.hold_next` keeps unanswered until :meth:`release` (or until
    the client goes away: the call then ends with status 499)."""

    method: str
    predicate: Callable[[Call], bool]
    after_effect: bool
    arrived: asyncio.Event
    released: asyncio.Event
    call: Call | None = None

    def release(self) -> None:
        self.released.set()


@dataclass
class _StoredFile:
    file_id: str
    file_unique_id: str
    file_path: str
    content: bytes
    size: int | None = None
    """The size Telegram reports, when a test claims a file bigger than its bytes."""

    @property
    def file_size(self) -> int:
        return self.size if self.size is not None else len(self.content)


@dataclass
class _Handler:
    name: str
    func: Callable[[Call], Any]
    is_async: bool = False


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, the unit of Telegram's entity offsets."""
    return len(text.encode("utf-16-le")) // 2


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def _decode_value(key: str, value: str) -> Any:
    if key in _STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _as_int(value: Any, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ApiError(400, f"Bad Request: invalid integer value {value!r}") from exc


def _update_type(update: dict[str, Any]) -> str | None:
    return next((key for key in update if key != "update_id"), None)


def _check_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Visible text and entities of an HTML message, raising ApiError like Telegram
    (``tests/fakes/telegram_html.py``)."""
    try:
        return parse_html(text)
    except HtmlError as exc:
        raise ApiError(400, f"Bad Request: can't parse entities: {exc}") from exc


def _strip_html(text: str) -> str:
    """The visible text of HTML, for when validation is off: tags gone, references decoded."""
    return decode_references(_TAG_RE.sub("", text))


_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MDV2_ENTITY_NAMES = {
    "*": "Bold",
    "_": "Italic",
    "__": "Underline",
    "~": "Strikethrough",
    "||": "Spoiler",
}


def _render_markdown_v2(text: str, validate: bool) -> str:
    """Return the visible text of MarkdownV2, raising ApiError like Telegram on bad markup."""
    out: list[str] = []
    open_marks: list[tuple[str, int]] = []
    i, n = 0, len(text)

    def fail(message: str) -> ApiError:
        return ApiError(400, f"Bad Request: can't parse entities: {message}")

    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n:
            out.append(text[i + 1])
            i += 2
            continue
        if char == "`":
            fence = "```" if text.startswith("```", i) else "`"
            end = text.find(fence, i + len(fence))
            if end < 0:
                if validate:
                    raise fail(
                        f"Can't find end of Pre entity at byte offset {_byte_offset(text, i)}"
                    )
                out.append(text[i:])
                break
            body = text[i + len(fence) : end]
            if fence == "```" and "\n" in body:
                body = body.split("\n", 1)[1]
            out.append(re.sub(r"\\([`\\])", r"\1", body))
            i = end + len(fence)
            continue
        if char == "[":
            close = text.find("](", i)
            if close >= 0:
                end = text.find(")", close + 2)
                if end >= 0:
                    out.append(_render_markdown_v2(text[i + 1 : close], validate))
                    i = end + 1
                    continue
            if validate:
                raise fail("Character '[' is reserved and must be escaped with the preceding '\\'")
        mark = None
        for candidate in ("||", "__", "*", "_", "~"):
            if text.startswith(candidate, i):
                mark = candidate
                break
        if mark is not None:
            if open_marks and open_marks[-1][0] == mark:
                open_marks.pop()
            elif any(existing == mark for existing, _ in open_marks):
                if validate:
                    raise fail(
                        f"Can't find end of {_MDV2_ENTITY_NAMES[open_marks[-1][0]]} entity at "
                        f"byte offset {_byte_offset(text, open_marks[-1][1])}"
                    )
            else:
                open_marks.append((mark, i))
            i += len(mark)
            continue
        if char == ">" and (i == 0 or text[i - 1] == "\n"):
            i += 1
            continue
        if validate and char in _MDV2_RESERVED:
            raise fail(
                f"Character '{char}' is reserved and must be escaped with the preceding '\\'"
            )
        out.append(char)
        i += 1
    if validate and open_marks:
        mark, index = open_marks[-1]
        raise fail(
            f"Can't find end of {_MDV2_ENTITY_NAMES[mark]} entity at byte offset "
            f"{_byte_offset(text, index)}"
        )
    return "".join(out)


def _render_markdown(text: str, validate: bool) -> str:
    """Legacy Markdown: ``*bold*``, ``_italic_``, ```code```, ``[text](url)``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "[":
            close = text.find("](", i)
            end = text.find(")", close + 2) if close >= 0 else -1
            if close >= 0 and end >= 0:
                out.append(text[i + 1 : close])
                i = end + 1
                continue
        if char in "*_`":
            fence = "```" if text.startswith("```", i) else char
            end = text.find(fence, i + len(fence))
            if end < 0:
                if validate:
                    raise ApiError(
                        400,
                        "Bad Request: can't parse entities: Can't find end of the entity "
                        f"starting at byte offset {_byte_offset(text, i)}",
                    )
                out.append(text[i:])
                break
            out.append(text[i + len(fence) : end])
            i = end + len(fence)
            continue
        out.append(char)
        i += 1
    return "".join(out)


class FakeTelegram:
    """A Telegram Bot API server on 127.0.0.1 that records calls and injects updates/faults."""

    def __init__(
        self,
        token: str = TOKEN,
        bot_id: int = 999,
        bot_username: str = "companion_bot",
        can_read_all_group_messages: bool = False,
        *,
        bot_first_name: str = "Companion",
        seed: int = 0,
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.bot_username = bot_username
        self.bot_first_name = bot_first_name
        self.can_read_all_group_messages = can_read_all_group_messages
        self.can_join_groups = True
        self.supports_inline_queries = False

        self.calls: list[Call] = []
        self.seed = seed
        self.rng = random.Random(seed)
        self.fail_ratio = 0.0
        #: HTML and Markdown(V2) texts are checked like Telegram does; False accepts anything.
        self.validate_markup = True
        #: Reject ``message_thread_id=1`` (the General topic) on sends to forum chats.
        self.strict_general_topic = True
        #: Sends to these chats get 403 "Forbidden: bot was blocked by the user".
        self.blocked_chats: set[int] = set()
        #: chat id -> HTTP status: sends to these chats fail with it for as long as they are
        #: listed (an outage of the part of Telegram that serves them; the owner's DM, say,
        #: still works).
        self.failing_chats: dict[int, int] = {}
        #: (messages, seconds): more sends to one chat within the window get 429.
        self.per_chat_limit: tuple[int, float] | None = None
        #: Custom answers: lower-case method name -> function(Call) returning the result or
        #: raising ApiError.  Takes precedence over the built-in methods.
        self.responders: dict[str, Callable[[Call], Any]] = {}
        #: getChatMember answers: (chat_id, user_id) -> ChatMember dict.
        self.chat_members: dict[tuple[int, int], dict[str, Any]] = {}
        #: Tokens of further bots (:meth:`add_bot`) -> their user objects.
        self.other_bots: dict[str, dict[str, Any]] = {}
        #: (bot id, chat id): that bot is not a member of that group; its sends get 403.
        self.non_member_chats: set[tuple[int, int]] = set()

        self.webhook: dict[str, Any] | None = None
        self.webhook_posts: list[tuple[dict[str, Any], int]] = []
        self.allowed_updates: list[str] | None = None
        self.delivered_update_ids: list[int] = []
        self.deleted_messages: list[tuple[int, int]] = []
        self.reactions: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self.answered_callback_queries: list[str] = []
        self.left_chats: list[int | str] = []
        self.commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        #: Paths requested from the file URL (``/file/bot<token>/<path>``), served or not.
        self.file_fetches: list[str] = []

        self.base_url = ""
        self.base_file_url = ""
        self.port = 0

        self._updates: list[dict[str, Any]] = []
        self._next_update_id = 1
        self._message_ids: dict[int, int] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._users: dict[int, dict[str, Any]] = {}
        self._files: dict[str, _StoredFile] = {}
        self._file_paths: dict[str, str] = {}
        self._file_seq = 0
        self._callback_seq = 0
        self._faults: dict[str, deque[_Fault]] = {}
        self._holds: list[Hold] = []
        self._reject_entities = 0
        self._send_times: dict[int, deque[float]] = {}
        self._stalled = False
        self._closing = False
        self._pending_polls = 0
        self._poll_seq = 0
        self._active_poll = 0
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._handlers = self._build_handlers()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port."""
        if self._runner is not None:
            raise RuntimeError("FakeTelegram is already started")
        self._changed = asyncio.Event()
        self._closing = False
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle_api)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._handle_file)
        runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        self.base_url = f"http://127.0.0.1:{self.port}/bot"
        self.base_file_url = f"http://127.0.0.1:{self.port}/file/bot"

    async def close(self) -> None:
        """Answer held long polls at once (with no updates) and stop the server."""
        self._closing = True
        self._notify()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ state and waiting

    def _notify(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def _wait_changed(self, seconds: float | None) -> None:
        event = self._changed
        if seconds is None:
            await event.wait()
            return
        if seconds <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()

    async def _sleep_unless_closing(self, seconds: float) -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        while not self._closing:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            await self._wait_changed(remaining)

    @property
    def stalled(self) -> bool:
        """While True, getUpdates requests are held unanswered (a hung connection)."""
        return self._stalled

    @stalled.setter
    def stalled(self, value: bool) -> None:
        self._stalled = value
        self._notify()

    @property
    def pending_polls(self) -> int:
        """Number of getUpdates requests the server is holding open right now."""
        return self._pending_polls

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates queued and not yet confirmed by an offset."""
        return list(self._updates)

    def sent(self, method: str = "sendMessage", chat_id: int | None = None) -> list[Call]:
        """Successful calls of ``method`` (case-insensitive), optionally to one chat."""
        wanted = method.lower()
        return [
            call
            for call in self.calls
            if call.ok
            and call.method.lower() == wanted
            and (chat_id is None or call.params.get("chat_id") == chat_id)
        ]

    def recent_calls(self, count: int = 15) -> str:
        lines = [call.summary() for call in self.calls[-count:]]
        return "\n".join(f"  {line}" for line in lines) or "  (no calls)"

    async def wait_until(
        self,
        condition: Callable[[], T | None],
        timeout: float = 5.0,  # noqa: ASYNC109
        description: str = "condition",
    ) -> T:
        """Wait until ``condition()`` is truthy (checked on every state change); return it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = condition()
            if value:
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"timed out after {timeout}s waiting for {description}; "
                    f"pending polls: {self._pending_polls}; recent calls:\n{self.recent_calls()}"
                )
            await self._wait_changed(remaining)

    async def wait_for_call(
        self,
        predicate: Callable[[Call], bool],
        timeout: float = 5.0,  # noqa: ASYNC109
        *,
        since: int = 0,
        include_pending: bool = False,
    ) -> Call:
        """First recorded call from index ``since`` on that matches ``predicate``.

        Only answered calls count unless ``include_pending`` is set.
        """

        def find() -> Call | None:
            for call in self.calls[since:]:
                if (include_pending or call.status is not None) and predicate(call):
                    return call
            return None

        return await self.wait_until(find, timeout, "a matching call")

    async def wait_for_sent(
        self,
        predicate: Callable[[Call], bool] | None = None,
        *,
        chat_id: int | None = None,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
        method: str = "sendMessage",
        since: int = 0,
    ) -> list[Call]:
        """Wait until ``count`` successful ``method`` calls match; return all that match."""

        wanted = method.lower()

        def find() -> list[Call] | None:
            matching = [
                call
                for call in self.calls[since:]
                if call.ok
                and call.method.lower() == wanted
                and (chat_id is None or call.params.get("chat_id") == chat_id)
                and (predicate is None or predicate(call))
            ]
            return matching if len(matching) >= count else None

        where = f" to chat {chat_id}" if chat_id is not None else ""
        return await self.wait_until(find, timeout, f"{count} successful {method} call(s){where}")

    async def wait_for_pending_polls(
        self,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> None:
        """Wait until at least ``count`` getUpdates requests are being held open."""
        await self.wait_until(
            lambda: self._pending_polls >= count, timeout, f"{count} pending getUpdates"
        )

    # ------------------------------------------------------------------ faults

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        description: str | None = None,
        count: int = 1,
    ) -> None:
        """Answer the next ``count`` calls of ``method`` ("*" = any but getUpdates) with an error.

        429 carries ``parameters.retry_after``; other statuses get Telegram-like descriptions
        (400 "Bad Request: ...", 403 "Forbidden: bot was blocked by the user", 500 ...).
        """
        parameters = None
        if status == 429:
            parameters = {"retry_after": retry_after}
            desc = description or f"Too Many Requests: retry after {retry_after}"
        else:
            desc = description or _DEFAULT_DESCRIPTIONS.get(status, f"Error {status}")
        self._add_fault(
            method,
            _Fault("error", count, status=status, description=desc, parameters=parameters),
        )

    def delay_next(self, method: str, seconds: float, *, count: int = 1) -> None:
        """Hold the next ``count`` calls of ``method`` for ``seconds`` before answering."""
        self._add_fault(method, _Fault("delay", count, delay=seconds))

    def garble_next(self, method: str, *, count: int = 1) -> None:
        """Answer the next ``count`` calls of ``method`` with a 200 that is not JSON."""
        self._add_fault(method, _Fault("garbage", count))

    def hold_next(
        self,
        method: str,
        predicate: Callable[[Call], bool] | None = None,
        *,
        after_effect: bool = False,
    ) -> Hold:
        """Hold the next call of ``method`` that matches ``predicate`` unanswered.

        By default it is held before it takes effect (nothing is sent). With ``after_effect``
        it is held after: the message exists and ``call.result`` holds it, but the answer never
        reaches the client if it goes away first (status 499) — a platform that sent a message
        and lost the confirmation. ``hold.arrived`` is set when the call is being held.
        """
        hold = Hold(
            method.lower(), predicate or (lambda _call: True), after_effect,
            asyncio.Event(), asyncio.Event(),
        )  # fmt: skip
        self._holds.append(hold)
        return hold

    def _take_hold(self, method: str, call: Call) -> Hold | None:
        for hold in self._holds:
            if hold.method == method and hold.predicate(call):
                self._holds.remove(hold)
                return hold
        return None

    async def _held(self, hold: Hold, call: Call) -> None:
        hold.call = call
        hold.arrived.set()
        self._notify()
        await hold.released.wait()

    def reject_entities_once(self) -> None:
        """The next sendMessage/editMessageText with a parse_mode gets "can't parse entities"."""
        self._reject_entities += 1

    def _add_fault(self, method: str, fault: _Fault) -> None:
        self._faults.setdefault(method.lower(), deque()).append(fault)

    def _take_fault(self, method: str) -> _Fault | None:
        for key in (method.lower(), "*"):
            if key == "*" and method.lower() == "getupdates":
                continue
            queue = self._faults.get(key)
            if queue:
                fault = queue[0]
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.popleft()
                return fault
        return None

    # ------------------------------------------------------------------ updates

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates; assigns a monotonic ``update_id`` if missing."""
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
        update_id = int(update["update_id"])
        self._next_update_id = max(self._next_update_id, update_id + 1)
        self._register_update(update)
        self._updates.append(update)
        self._updates.sort(key=lambda item: int(item["update_id"]))
        self._notify()
        return update_id

    def _register_update(self, update: dict[str, Any]) -> None:
        for key in ("message", "edited_message", "channel_post", "edited_channel_post"):
            message = update.get(key)
            if isinstance(message, dict):
                self._register_message(message)
        query = update.get("callback_query")
        if isinstance(query, dict):
            if isinstance(query.get("from"), dict):
                self._users[int(query["from"]["id"])] = query["from"]
            if isinstance(query.get("message"), dict):
                self._register_message(query["message"])

    def _register_message(self, message: dict[str, Any]) -> None:
        chat = message.get("chat")
        if not isinstance(chat, dict) or "message_id" not in message:
            return
        chat_id = int(chat["id"])
        self._chats.setdefault(chat_id, chat)
        if isinstance(message.get("from"), dict):
            self._users.setdefault(int(message["from"]["id"]), message["from"])
        message_id = int(message["message_id"])
        self._message_ids[chat_id] = max(self._message_ids.get(chat_id, 0), message_id)
        self._messages[(chat_id, message_id)] = message

    def next_message_id(self, chat_id: int) -> int:
        """Allocate the next message id in ``chat_id`` (shared by user and bot messages)."""
        value = self._message_ids.get(chat_id, 0) + 1
        self._message_ids[chat_id] = value
        return value

    def add_chat(self, chat: dict[str, Any]) -> None:
        """Make a chat known (type, title, is_forum, ...), e.g. before the bot sends to it."""
        self._chats[int(chat["id"])] = chat

    def add_file(
        self, file_id: str, content: bytes, file_path: str | None = None, size: int | None = None
    ) -> None:
        """Serve ``content`` for ``file_id`` through getFile and the file download URL
        (``size``: the size Telegram claims, to test limits without the bytes)."""
        path = file_path or f"files/{file_id}"
        self._files[file_id] = _StoredFile(file_id, f"u{file_id}", path, content, size)
        self._file_paths[path] = file_id

    def file_downloads(self) -> list[str]:
        """File ids whose getFile succeeded, in order."""
        return [str(c.params.get("file_id")) for c in self.sent("getFile")]

    def get_message(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        """A message as the fake knows it now (after edits), or None if unknown/deleted."""
        return self._messages.get((chat_id, message_id))

    def _user(
        self, user_id: int, first_name: str, username: str | None, language_code: str | None
    ) -> dict[str, Any]:
        user: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            user["username"] = username
        if language_code:
            user["language_code"] = language_code
        return user

    def bot_user(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.bot_first_name,
            "username": self.bot_username,
        }

    def add_bot(self, token: str, bot_id: int, username: str, first_name: str) -> dict[str, Any]:
        """Another bot this server knows by ``token``; its user object."""
        user = {"id": bot_id, "is_bot": True, "first_name": first_name, "username": username}
        self.other_bots[token] = user
        return dict(user)

    def _bot_of(self, token: str) -> dict[str, Any] | None:
        """The bot ``token`` belongs to, or None for a token nobody has."""
        if token == self.token:
            return self.bot_user()
        found = self.other_bots.get(token)
        return dict(found) if found is not None else None

    def _caller(self, call: Call) -> dict[str, Any]:
        """The bot that made ``call``: the main one, or one added with :meth:`add_bot`."""
        if call.bot_id is None or call.bot_id == self.bot_id:
            return self.bot_user()
        return next(dict(u) for u in self.other_bots.values() if u["id"] == call.bot_id)

    def sent_by(
        self, bot_id: int, method: str = "sendMessage", chat_id: int | None = None
    ) -> list[Call]:
        """Successful calls of ``method`` that bot ``bot_id`` made."""
        return [call for call in self.sent(method, chat_id) if call.bot_id == bot_id]

    def calls_by(self, bot_id: int) -> list[Call]:
        """Every call bot ``bot_id`` made, answered or not."""
        return [call for call in self.calls if call.bot_id == bot_id]

    def _new_file(
        self, kind: str, content: bytes, file_name: str | None = None, size: int | None = None
    ) -> _StoredFile:
        self._file_seq += 1
        file_id = f"{kind}-{self._file_seq}"
        suffix = f"/{file_name}" if file_name else ""
        extension = {"voice": ".oga", "video_note": ".mp4", "photo": ".jpg"}.get(kind, "")
        path = f"{kind}s/file_{self._file_seq}{suffix or extension}"
        self.add_file(file_id, content, path, size)
        return self._files[file_id]

    def _media_object(
        self,
        kind: str,
        content: bytes,
        file_name: str | None = None,
        mime_type: str | None = None,
        *,
        duration: int = 2,
        size: int | None = None,
        emoji: str = "😀",
        set_name: str | None = None,
    ) -> Any:
        stored = self._new_file(kind, content, file_name, size)
        base = {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
        }
        if kind == "photo":
            small = self._new_file("photo", content[:64])
            return [
                {
                    "file_id": small.file_id,
                    "file_unique_id": small.file_unique_id,
                    "file_size": len(small.content),
                    "width": 90,
                    "height": 67,
                },
                {**base, "width": 800, "height": 600},
            ]
        if kind == "sticker":
            sticker = {
                **base,
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
                "emoji": emoji,
            }
            if set_name:
                sticker["set_name"] = set_name
            return sticker
        if kind == "voice":
            return {**base, "duration": duration, "mime_type": mime_type or "audio/ogg"}
        if kind == "video_note":
            return {**base, "duration": duration, "length": 240}
        if kind in ("audio", "video", "animation"):
            extra: dict[str, Any] = {"duration": duration}
            if kind != "audio":
                extra.update(width=640, height=480)
            if file_name:
                extra["file_name"] = file_name
            if mime_type:
                extra["mime_type"] = mime_type
            return {**base, **extra}
        document = {**base, "file_name": file_name or "document.bin"}
        document["mime_type"] = mime_type or "application/octet-stream"
        return document

    def _topic_root(
        self, chat: dict[str, Any], thread_id: int, user: dict[str, Any]
    ) -> dict[str, Any]:
        """The forum_topic_created service message every topic message replies to."""
        existing = self._messages.get((int(chat["id"]), thread_id))
        if existing is not None:
            return {k: v for k, v in existing.items() if k != "reply_to_message"}
        return {
            "message_id": thread_id,
            "date": int(time.time()) - 3600,
            "chat": chat,
            "from": user,
            "message_thread_id": thread_id,
            "is_topic_message": True,
            "forum_topic_created": {"name": f"Topic {thread_id}", "icon_color": 7322096},
        }

    def message_update(
        self,
        *,
        chat_id: int,
        text: str | None = None,
        user_id: int | None = None,
        first_name: str = "Alice",
        username: str | None = "alice",
        chat_type: str = "private",
        chat_title: str | None = None,
        message_thread_id: int | None = None,
        is_topic_message: bool = False,
        reply_to_message: dict[str, Any] | None = None,
        entities: list[dict[str, Any]] | None = None,
        caption: str | None = None,
        photo: bool = False,
        sticker: bool = False,
        voice: bool = False,
        document: bool = False,
        audio: bool = False,
        video_note: bool = False,
        media: bytes | None = None,
        duration: int = 2,
        file_size: int | None = None,
        sticker_emoji: str = "😀",
        sticker_set: str | None = None,
        message_id: int | None = None,
        update_id: int | None = None,
        is_forum: bool | None = None,
        language_code: str | None = "en",
        date: int | None = None,
        edited: bool = False,
        document_name: str = "notes.txt",
        document_mime: str = "text/plain",
    ) -> dict[str, Any]:
        """Build a realistic Update with a message (not queued; see :meth:`push_update`).

        * ``chat_type`` "private" | "group" | "supergroup" | "channel" (a channel gives a
          ``channel_post`` without ``from``).  A supergroup is a forum when ``is_forum`` is
          True, or by default when ``is_topic_message`` is set.
        * A topic message replies to its topic's ``forum_topic_created`` message, as on
          Telegram, unless ``reply_to_message`` is given.
        * A text starting with "/" gets a ``bot_command`` entity unless ``entities`` is given
          (CommandHandler needs it).  Entity offsets are in UTF-16 code units.
        * ``photo``/``sticker``/``voice``/``audio``/``video_note``/``document`` attach a media
          object whose file can be fetched with getFile and downloaded: ``media`` is its
          content (a document's name and type: ``document_name``, ``document_mime``),
          ``duration`` its length in seconds, ``file_size`` the size Telegram claims
          (default: the content's), ``sticker_emoji``/``sticker_set`` a sticker's emoji and set.
        * ``user_id`` defaults to ``chat_id`` in private chats (as on Telegram), else 1001.
        * ``update_id`` is left out unless given: :meth:`push_update` assigns it.
        """
        if user_id is None:
            user_id = chat_id if chat_type == "private" else 1001
        date = int(time.time()) if date is None else date
        known = self._chats.get(chat_id)
        user = self._user(user_id, first_name, username, language_code)
        if chat_type == "private":
            chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": first_name}
            if username:
                chat["username"] = username
        else:
            default_title = {"group": "Test Group", "channel": "Test Channel"}
            if chat_title is None and known is not None and known.get("title"):
                chat_title = str(known["title"])
            chat = {
                "id": chat_id,
                "type": chat_type,
                "title": chat_title or default_title.get(chat_type, "Test Supergroup"),
            }
            forum = is_forum
            if forum is None:
                forum = is_topic_message or bool(known is not None and known.get("is_forum"))
            if chat_type == "supergroup" and forum:
                chat["is_forum"] = True
        self._chats[chat_id] = chat
        self._users[user_id] = user

        if message_id is None:
            message_id = self.next_message_id(chat_id)
        message: dict[str, Any] = {"message_id": message_id, "date": date, "chat": chat}
        if chat_type != "channel":
            message["from"] = user
        if message_thread_id is not None:
            message["message_thread_id"] = message_thread_id
        if is_topic_message:
            message["is_topic_message"] = True
        if reply_to_message is not None:
            message["reply_to_message"] = reply_to_message
        elif is_topic_message and message_thread_id is not None:
            message["reply_to_message"] = self._topic_root(chat, message_thread_id, user)
        if text is not None:
            message["text"] = text
            if entities is None and text.startswith("/"):
                command = text.split(maxsplit=1)[0]
                entities = [{"type": "bot_command", "offset": 0, "length": utf16_len(command)}]
            if entities:
                message["entities"] = entities
        if caption is not None:
            message["caption"] = caption
            if entities and text is None:
                message["caption_entities"] = entities
        sized = {"duration": duration, "size": file_size}
        if photo:
            message["photo"] = self._media_object(
                "photo", media or b"\x89PNG fake photo bytes", size=file_size
            )
        if sticker:
            message["sticker"] = self._media_object(
                "sticker", media or b"RIFF fake sticker", emoji=sticker_emoji, set_name=sticker_set
            )
        if voice:
            message["voice"] = self._media_object("voice", media or b"OggS fake voice", **sized)
        if audio:
            message["audio"] = self._media_object(
                "audio", media or b"ID3 fake song", "song.mp3", "audio/mpeg", **sized
            )
        if video_note:
            message["video_note"] = self._media_object(
                "video_note", media or b"fake round video", **sized
            )
        if document:
            message["document"] = self._media_object(
                "document", media or b"fake document bytes\n", document_name, document_mime
            )
        if edited:
            message["edit_date"] = date
        self._register_message(message)

        key = "channel_post" if chat_type == "channel" else "message"
        if edited:
            key = f"edited_{key}"
        update: dict[str, Any] = {key: message}
        if update_id is not None:
            update = {"update_id": update_id, **update}
        return update

    def send_user_message(self, **kwargs: Any) -> dict[str, Any]:
        """:meth:`message_update` + :meth:`push_update`; returns the queued update."""
        update = self.message_update(**kwargs)
        self.push_update(update)
        return update

    def callback_query_update(
        self,
        *,
        chat_id: int,
        user_id: int,
        data: str,
        message_id: int,
        first_name: str = "Alice",
        username: str | None = "alice",
        chat_type: str = "private",
        message_text: str = "...",
        callback_query_id: str | None = None,
        update_id: int | None = None,
    ) -> dict[str, Any]:
        """An Update with a callback_query on ``message_id`` (the stored bot message if known)."""
        user = self._user(user_id, first_name, username, "en")
        message = self._messages.get((chat_id, message_id))
        if message is None:
            chat = self._chats.get(chat_id) or self._synth_chat(chat_id, chat_type)
            message = {
                "message_id": message_id,
                "date": int(time.time()),
                "chat": chat,
                "from": self.bot_user(),
                "text": message_text,
            }
        self._callback_seq += 1
        query = {
            "id": callback_query_id or f"cbq-{self._callback_seq}",
            "from": user,
            "chat_instance": f"ci-{chat_id}",
            "data": data,
            "message": message,
        }
        update: dict[str, Any] = {"callback_query": query}
        if update_id is not None:
            update = {"update_id": update_id, **update}
        return update

    def reaction_update(
        self,
        *,
        chat_id: int,
        message_id: int,
        emoji: str,
        user_id: int | None = None,
        first_name: str = "Alice",
        old_emoji: str | None = None,
    ) -> dict[str, Any]:
        """A ``message_reaction`` update: a user set ``emoji`` on ``message_id``. Telegram
        sends it only to bots that list it in ``allowed_updates`` (see getUpdates)."""
        chat = self._chats.get(chat_id) or self._synth_chat(chat_id)
        user_id = chat_id if user_id is None and chat["type"] == "private" else (user_id or 1001)
        old = [{"type": "emoji", "emoji": old_emoji}] if old_emoji else []
        return {
            "message_reaction": {
                "chat": chat,
                "message_id": message_id,
                "user": self._user(user_id, first_name, None, "en"),
                "date": int(time.time()),
                "old_reaction": old,
                "new_reaction": [{"type": "emoji", "emoji": emoji}],
            }
        }

    def mention_entity(self, text: str, username: str | None = None) -> list[dict[str, Any]]:
        """The ``mention`` entity for "@username" (default: the bot) inside ``text``."""
        token = f"@{username or self.bot_username}"
        index = text.lower().find(token.lower())
        if index < 0:
            raise ValueError(f"{token!r} does not occur in {text!r}")
        return [{"type": "mention", "offset": utf16_len(text[:index]), "length": utf16_len(token)}]

    async def post_webhook(
        self,
        update: dict[str, Any],
        secret: str | None | _Registered = REGISTERED_SECRET,
    ) -> int:
        """POST ``update`` to the webhook set with setWebhook; return the HTTP status.

        ``secret`` goes in ``X-Telegram-Bot-Api-Secret-Token``; by default the registered
        one, None sends no header.
        """
        if self.webhook is None:
            raise RuntimeError("no webhook is set (setWebhook was not called)")
        url = str(self.webhook["url"])
        if urlsplit(url).hostname not in ("127.0.0.1", "localhost"):
            raise ValueError(f"refusing to post to a webhook outside 127.0.0.1: {url}")
        if "update_id" not in update:
            update["update_id"] = self._next_update_id
        self._next_update_id = max(self._next_update_id, int(update["update_id"]) + 1)
        self._register_update(update)
        if secret is REGISTERED_SECRET:
            secret = self.webhook.get("secret_token")
        headers = {"Content-Type": "application/json"}
        if isinstance(secret, str):
            headers["X-Telegram-Bot-Api-Secret-Token"] = secret
        body = json.dumps(update).encode()
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=body, headers=headers) as response,
        ):
            await response.read()
            status = response.status
        self.webhook_posts.append((update, status))
        return status

    # ------------------------------------------------------------------ HTTP plumbing

    async def _read_params(
        self, request: web.Request
    ) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
        params: dict[str, Any] = {k: _decode_value(k, v) for k, v in request.query.items()}
        files: dict[str, tuple[str, bytes]] = {}
        if request.method != "POST" or not request.can_read_body:
            return params, files
        if request.content_type == "application/json":
            body = await request.json()
            if isinstance(body, dict):
                params.update(body)
            return params, files
        form = await request.post()
        for key, value in form.items():
            if isinstance(value, web.FileField):
                files[key] = (value.filename, value.file.read())
            elif isinstance(value, str):
                params[key] = _decode_value(key, value)
            else:
                params[key] = _decode_value(key, bytes(value).decode())
        return params, files

    def _canonical(self, method: str) -> str:
        handler = self._handlers.get(method.lower())
        return handler.name if handler is not None else method

    @staticmethod
    def _error_response(error: ApiError) -> web.Response:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": error.status,
            "description": error.description,
        }
        if error.parameters:
            body["parameters"] = error.parameters
        return web.json_response(body, status=error.status)

    async def _handle_api(self, request: web.Request) -> web.StreamResponse:
        raw_method = request.match_info["method"]
        params, files = await self._read_params(request)
        call = Call(
            method=self._canonical(raw_method),
            params=params,
            files=files,
            time=time.monotonic(),
            http_method=request.method,
        )
        self.calls.append(call)
        self._notify()
        try:
            response = await self._answer(request.match_info["token"], raw_method.lower(), call)
        except ApiError as error:
            call.status, call.description = error.status, error.description
            response = self._error_response(error)
        except asyncio.CancelledError:
            call.status = 499
            self._notify()
            raise
        except Exception as exc:  # a bug in a responder: answer 500 and keep serving
            call.status, call.description = 500, f"Internal Server Error: {exc!r}"
            response = self._error_response(ApiError(500, "Internal Server Error"))
        self._notify()
        return response

    async def _answer(self, token: str, method: str, call: Call) -> web.Response:
        bot = self._bot_of(token)
        if bot is None:
            raise ApiError(401, "Unauthorized")
        call.bot_id = int(bot["id"])
        if method == "getupdates" and call.bot_id != self.bot_id:
            result = await self._other_bot_poll(call)
            call.status, call.result = 200, result
            return web.json_response({"ok": True, "result": result})
        handler = self._handlers.get(method)
        responder = self.responders.get(method)
        if handler is None and responder is None:
            raise ApiError(404, "Not Found")
        hold = self._take_hold(method, call)
        if hold is not None and not hold.after_effect:
            await self._held(hold, call)
        fault = self._take_fault(method)
        if fault is not None and fault.kind == "delay":
            await self._sleep_unless_closing(fault.delay)
        elif fault is not None and fault.kind == "garbage":
            call.status = 200
            return web.Response(text="<html><body>502 Bad Gateway</body></html>", status=200)
        elif fault is not None:
            raise ApiError(fault.status, fault.description, fault.parameters)
        if method != "getupdates" and self.fail_ratio > 0 and self.rng.random() < self.fail_ratio:
            raise ApiError(500, "Internal Server Error")
        if responder is not None:
            result = responder(call)
            if asyncio.iscoroutine(result):
                result = await result
        else:
            assert handler is not None
            result = handler.func(call)
            if handler.is_async:
                result = await result
        if hold is not None and hold.after_effect:
            call.result = result
            await self._held(hold, call)
        call.status, call.result = 200, result
        return web.json_response({"ok": True, "result": result})

    async def _handle_file(self, request: web.Request) -> web.StreamResponse:
        self.file_fetches.append(request.match_info["path"])
        if self._bot_of(request.match_info["token"]) is None:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        file_id = self._file_paths.get(request.match_info["path"])
        if file_id is None:
            return web.json_response(
                {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
            )
        return web.Response(body=self._files[file_id].content)

    # ------------------------------------------------------------------ Bot API methods

    def _build_handlers(self) -> dict[str, _Handler]:
        sync: dict[str, Callable[[Call], Any]] = {
            "getMe": self._get_me,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "deleteMessage": self._delete_message,
            "deleteMessages": self._delete_messages,
            "sendChatAction": self._send_chat_action,
            "sendMessageDraft": self._send_message_draft,
            "setMyCommands": self._set_my_commands,
            "deleteMyCommands": self._delete_my_commands,
            "getMyCommands": self._get_my_commands,
            "answerCallbackQuery": self._answer_callback_query,
            "setMessageReaction": self._set_message_reaction,
            "getChat": self._get_chat,
            "getChatMember": self._get_chat_member,
            "leaveChat": self._leave_chat,
            "getFile": self._get_file,
        }
        handlers = {name.lower(): _Handler(name, func) for name, func in sync.items()}
        handlers["getupdates"] = _Handler("getUpdates", self._get_updates, is_async=True)
        for lower, (name, kind) in _MEDIA_METHODS.items():
            handlers[lower] = _Handler(name, self._media_sender(kind))
        return handlers

    def _get_me(self, call: Call) -> dict[str, Any]:
        main = call.bot_id in (None, self.bot_id)
        return {
            **self._caller(call),
            "can_join_groups": self.can_join_groups,
            "can_read_all_group_messages": self.can_read_all_group_messages and main,
            "supports_inline_queries": self.supports_inline_queries,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    def _confirm(self, offset: int) -> None:
        before = len(self._updates)
        if offset > 0:
            self._updates = [u for u in self._updates if int(u["update_id"]) >= offset]
        elif offset < 0:
            self._updates = self._updates[offset:]
        if len(self._updates) != before:
            self._notify()  # someone may wait for an update to be confirmed

    def _deliverable(self, limit: int) -> list[dict[str, Any]]:
        allowed = self.allowed_updates

        def wanted(update: dict[str, Any]) -> bool:
            kind = _update_type(update)
            if allowed:
                return kind in allowed
            return kind not in DEFAULT_EXCLUDED_UPDATES

        # Telegram never delivers (or keeps) updates of types the bot did not ask for.
        self._updates = [u for u in self._updates if wanted(u)]
        return self._updates[:limit]

    async def _get_updates(self, call: Call) -> list[dict[str, Any]]:
        params = call.params
        loop = asyncio.get_running_loop()
        self._poll_seq += 1
        poll_id = self._active_poll = self._poll_seq
        self._pending_polls += 1
        self._notify()
        try:
            while self._stalled and not self._closing:
                await self._wait_changed(None)
            if self._closing:
                return []
            if self.webhook is not None:
                raise ApiError(409, _WEBHOOK_CONFLICT)
            offset = _as_int(params.get("offset"), 0)
            limit = min(max(_as_int(params.get("limit"), 100), 1), 100)
            timeout = max(0.0, float(params.get("timeout") or 0))
            allowed = params.get("allowed_updates")
            if isinstance(allowed, list):
                self.allowed_updates = [str(kind) for kind in allowed] or None
            self._confirm(offset)
            deadline = loop.time() + timeout
            while True:
                if self._closing:
                    return []
                if self._active_poll != poll_id:
                    raise ApiError(409, _POLL_CONFLICT)
                if not self._stalled:
                    batch = self._deliverable(limit)
                    if batch or loop.time() >= deadline:
                        self.delivered_update_ids.extend(int(u["update_id"]) for u in batch)
                        return batch
                    await self._wait_changed(deadline - loop.time())
                else:
                    await self._wait_changed(None)
        finally:
            self._pending_polls -= 1
            self._notify()

    async def _other_bot_poll(self, call: Call) -> list[dict[str, Any]]:
        """A bot other than the main one polls: it gets no updates (the fake's updates are
        the main bot's), after its timeout, as a real long poll with nothing to say."""
        await self._sleep_unless_closing(max(0.0, float(call.params.get("timeout") or 0)))
        return []

    def _set_webhook(self, call: Call) -> bool:
        url = call.params.get("url")
        if url is None:
            raise ApiError(400, 'Bad Request: parameter "url" is required')
        if url == "":
            self.webhook = None
        else:
            secret = call.params.get("secret_token")
            if secret is not None and not _SECRET_RE.match(str(secret)):
                # fake's wording
                raise ApiError(400, "Bad Request: secret token contains unallowed characters")
            self.webhook = {
                "url": str(url),
                "secret_token": None if secret is None else str(secret),
                "allowed_updates": call.params.get("allowed_updates"),
                "max_connections": call.params.get("max_connections", 40),
                "ip_address": call.params.get("ip_address"),
            }
        if call.params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    def _delete_webhook(self, call: Call) -> bool:
        self.webhook = None
        if call.params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    def _get_webhook_info(self, _call: Call) -> dict[str, Any]:
        info: dict[str, Any] = {
            "url": self.webhook["url"] if self.webhook else "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }
        if self.webhook:
            info["max_connections"] = self.webhook.get("max_connections") or 40
            if self.webhook.get("allowed_updates"):
                info["allowed_updates"] = self.webhook["allowed_updates"]
        return info

    # -- chats and messages

    @staticmethod
    def _synth_chat(chat_id: int, chat_type: str | None = None) -> dict[str, Any]:
        if chat_type is None:
            if chat_id > 0:
                chat_type = "private"
            elif str(chat_id).startswith("-100"):
                chat_type = "supergroup"
            else:
                chat_type = "group"
        if chat_type == "private":
            return {"id": chat_id, "type": "private", "first_name": "User"}
        return {"id": chat_id, "type": chat_type, "title": f"Chat {chat_id}"}

    def _chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise ApiError(400, "Bad Request: chat_id is empty")
        if isinstance(chat_id, str):
            # "@channelusername": a channel with a stable made-up id
            name = chat_id.lstrip("@")
            numeric = -1000000000000 - (sum(map(ord, name)) % 1000000)
            chat = self._chats.get(numeric) or {
                "id": numeric,
                "type": "channel",
                "title": name,
                "username": name,
            }
            self._chats[numeric] = chat
            return chat
        chat_id = int(chat_id)
        known = self._chats.get(chat_id)
        if known is None:
            known = self._synth_chat(chat_id)
            self._chats[chat_id] = known
        return known

    def _check_member(self, call: Call, chat: dict[str, Any]) -> None:
        if (call.bot_id, int(chat["id"])) in self.non_member_chats:
            kind = "supergroup chat" if chat["type"] == "supergroup" else "group chat"
            raise ApiError(403, f"Forbidden: bot is not a member of the {kind}")

    def _check_send(
        self, chat: dict[str, Any], params: dict[str, Any], call: Call | None = None
    ) -> int | None:
        chat_id = int(chat["id"])
        if call is not None:
            self._check_member(call, chat)
        status = self.failing_chats.get(chat_id)
        if status is not None:
            raise ApiError(status, _DEFAULT_DESCRIPTIONS.get(status, f"Error {status}"))
        if chat_id in self.blocked_chats:
            raise ApiError(
                403,
                "Forbidden: bot was blocked by the user"
                if chat["type"] == "private"
                else "Forbidden: bot was kicked from the group chat",
            )
        thread_id = params.get("message_thread_id")
        thread = None if thread_id is None else _as_int(thread_id, 0)
        if thread == 1 and chat.get("is_forum") and self.strict_general_topic:
            raise ApiError(400, "Bad Request: message thread not found")
        return thread

    def _check_rate(self, chat_id: int) -> None:
        if self.per_chat_limit is None:
            return
        max_messages, window = self.per_chat_limit
        now = time.monotonic()
        stamps = self._send_times.setdefault(chat_id, deque())
        while stamps and now - stamps[0] >= window:
            stamps.popleft()
        if len(stamps) >= max_messages:
            retry = max(1, math.ceil(window - (now - stamps[0])))
            raise ApiError(429, f"Too Many Requests: retry after {retry}", {"retry_after": retry})
        stamps.append(now)

    def _reply_target(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        allow = bool(params.get("allow_sending_without_reply"))
        target_chat, reply_id = chat_id, None
        if isinstance(reply, dict):
            reply_id = reply.get("message_id")
            allow = allow or bool(reply.get("allow_sending_without_reply"))
            if isinstance(reply.get("chat_id"), int):
                target_chat = int(reply["chat_id"])
        elif params.get("reply_to_message_id") is not None:
            reply_id = params["reply_to_message_id"]
        if reply_id is None:
            return None
        message = self._messages.get((target_chat, _as_int(reply_id, 0)))
        if message is None:
            if allow:
                return None
            raise ApiError(400, "Bad Request: message to be replied not found")
        return {k: v for k, v in message.items() if k != "reply_to_message"}

    def _render(
        self, text: str, parse_mode: Any, *, text_method: bool
    ) -> tuple[str, list[dict[str, Any]] | None]:
        if parse_mode is None or parse_mode == "":
            return text, None
        if text_method and self._reject_entities > 0:
            self._reject_entities -= 1
            raise ApiError(
                400,
                "Bad Request: can't parse entities: Can't find end of the entity starting at "
                "byte offset 0",
            )
        mode = str(parse_mode).lower()
        if mode == "html":
            if self.validate_markup:
                return _check_html(text)
            return _strip_html(text), None
        if mode == "markdownv2":
            return _render_markdown_v2(text, self.validate_markup), None
        if mode == "markdown":
            return _render_markdown(text, self.validate_markup), None
        raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")

    def _bot_message(
        self, chat: dict[str, Any], thread_id: int | None, params: dict[str, Any], call: Call
    ) -> dict[str, Any]:
        chat_id = int(chat["id"])
        reply_to = self._reply_target(chat_id, params)
        sender = self._caller(call)
        message: dict[str, Any] = {
            "message_id": self.next_message_id(chat_id),
            "from": sender,
            "chat": chat,
            "date": int(time.time()),
        }
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            if chat.get("is_forum") and thread_id != 1:
                message["is_topic_message"] = True
                if reply_to is None:
                    reply_to = self._topic_root(chat, thread_id, sender)
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        markup = params.get("reply_markup")
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        return message

    def _text_param(self, params: dict[str, Any], empty_error: str) -> str:
        text = params.get("text")
        if text is None or str(text) == "":
            raise ApiError(400, empty_error)
        return str(text)

    def _send_message(self, call: Call) -> dict[str, Any]:
        params = call.params
        chat = self._chat(params)
        thread = self._check_send(chat, params, call)
        text = self._text_param(params, "Bad Request: message text is empty")
        visible, parsed = self._render(text, params.get("parse_mode"), text_method=True)
        if not visible.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(visible) > MAX_TEXT_LENGTH:
            raise ApiError(400, "Bad Request: message is too long")
        self._check_rate(int(chat["id"]))
        message = self._bot_message(chat, thread, params, call)
        message["text"] = visible
        entities = parsed or params.get("entities")
        if isinstance(entities, list) and entities:
            message["entities"] = entities
        self._register_message(message)
        return message

    def _editable(self, call: Call, action: str) -> dict[str, Any]:
        params = call.params
        chat = self._chat(params)
        message_id = _as_int(params.get("message_id"), 0)
        message = self._messages.get((int(chat["id"]), message_id))
        if message is None:
            raise ApiError(400, f"Bad Request: message to {action} not found")
        if (message.get("from") or {}).get("id") != self._caller(call)["id"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        return message

    def _edit_message_text(self, call: Call) -> Any:
        params = call.params
        if params.get("inline_message_id"):
            return True
        message = self._editable(call, "edit")
        text = self._text_param(params, "Bad Request: text must be non-empty")
        visible, parsed = self._render(text, params.get("parse_mode"), text_method=True)
        if utf16_len(visible) > MAX_TEXT_LENGTH:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        markup = params.get("reply_markup")
        entities = parsed or []
        if (visible, entities, markup) == (
            message.get("text"),
            message.get("entities", []),
            message.get("reply_markup"),
        ):
            raise ApiError(400, _NOT_MODIFIED)
        message["text"] = visible
        if entities:
            message["entities"] = entities
        else:
            message.pop("entities", None)
        message["edit_date"] = int(time.time())
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)
        return dict(message)

    def _edit_message_reply_markup(self, call: Call) -> Any:
        params = call.params
        if params.get("inline_message_id"):
            return True
        message = self._editable(call, "edit")
        markup = params.get("reply_markup")
        if markup == message.get("reply_markup"):
            raise ApiError(400, _NOT_MODIFIED)
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)
        message["edit_date"] = int(time.time())
        return dict(message)

    def _delete_message(self, call: Call) -> bool:
        chat = self._chat(call.params)
        key = (int(chat["id"]), _as_int(call.params.get("message_id"), 0))
        if self._messages.pop(key, None) is None:
            raise ApiError(400, "Bad Request: message to delete not found")
        self.deleted_messages.append(key)
        return True

    def _delete_messages(self, call: Call) -> bool:
        chat = self._chat(call.params)
        ids = call.params.get("message_ids")
        if not isinstance(ids, list) or not ids:
            raise ApiError(400, "Bad Request: message identifiers are not specified")
        for message_id in ids:
            key = (int(chat["id"]), int(message_id))
            if self._messages.pop(key, None) is not None:
                self.deleted_messages.append(key)
        return True

    def _send_chat_action(self, call: Call) -> bool:
        chat = self._chat(call.params)
        self._check_member(call, chat)
        if int(chat["id"]) in self.blocked_chats:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        if call.params.get("action") not in _CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        return True

    def _send_message_draft(self, call: Call) -> bool:
        params = call.params
        chat = self._chat(params)
        if chat["type"] != "private":
            # fake's wording: drafts exist only in private chats
            raise ApiError(400, "Bad Request: drafts can be sent only to private chats")
        if _as_int(params.get("draft_id"), 0) == 0:
            raise ApiError(400, "Bad Request: draft_id must be non-zero")  # fake's wording
        text = params.get("text")
        if text is not None:
            visible, _ = self._render(str(text), params.get("parse_mode"), text_method=False)
            if utf16_len(visible) > MAX_TEXT_LENGTH:
                raise ApiError(400, "Bad Request: message is too long")
        return True

    @staticmethod
    def _commands_key(params: dict[str, Any]) -> tuple[str, str]:
        scope = params.get("scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    def _set_my_commands(self, call: Call) -> bool:
        commands = call.params.get("commands")
        if not isinstance(commands, list):
            raise ApiError(400, 'Bad Request: parameter "commands" is required')
        for command in commands:
            if not isinstance(command, dict) or not _COMMAND_RE.match(
                str(command.get("command", ""))
            ):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(str(command.get("description", ""))) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands[self._commands_key(call.params)] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _delete_my_commands(self, call: Call) -> bool:
        self.commands.pop(self._commands_key(call.params), None)
        return True

    def _get_my_commands(self, call: Call) -> list[dict[str, Any]]:
        return list(self.commands.get(self._commands_key(call.params), []))

    def _answer_callback_query(self, call: Call) -> bool:
        query_id = call.params.get("callback_query_id")
        if not query_id:
            raise ApiError(400, "Bad Request: query is too old and response timeout expired")
        self.answered_callback_queries.append(str(query_id))
        return True

    def _set_message_reaction(self, call: Call) -> bool:
        chat = self._chat(call.params)
        self._check_member(call, chat)
        message_id = _as_int(call.params.get("message_id"), 0)
        reaction = call.params.get("reaction") or []
        if not isinstance(reaction, list):
            raise ApiError(400, "Bad Request: REACTION_INVALID")
        for item in reaction:
            if not isinstance(item, dict):
                raise ApiError(400, "Bad Request: REACTION_INVALID")
            if item.get("type") == "emoji" and item.get("emoji") not in _ALLOWED_REACTIONS:
                raise ApiError(400, "Bad Request: REACTION_INVALID")
        self.reactions[(int(chat["id"]), message_id)] = reaction
        return True

    def _get_chat(self, call: Call) -> dict[str, Any]:
        chat = self._chat(call.params)
        return {
            **chat,
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    def _get_chat_member(self, call: Call) -> dict[str, Any]:
        chat = self._chat(call.params)
        user_id = _as_int(call.params.get("user_id"), 0)
        override = self.chat_members.get((int(chat["id"]), user_id))
        if override is not None:
            return override
        bots = {int(u["id"]): u for u in [self.bot_user(), *self.other_bots.values()]}
        if user_id in bots:
            user = dict(bots[user_id])
        else:
            user = self._users.get(user_id) or {
                "id": user_id,
                "is_bot": False,
                "first_name": "User",
            }
        return {"status": "member", "user": user}

    def _leave_chat(self, call: Call) -> bool:
        chat = self._chat(call.params)
        self.left_chats.append(chat["id"])
        return True

    def _get_file(self, call: Call) -> dict[str, Any]:
        stored = self._files.get(str(call.params.get("file_id")))
        if stored is None:
            raise ApiError(400, "Bad Request: invalid file_id")
        if stored.file_size > MAX_DOWNLOAD_BYTES:
            raise ApiError(400, "Bad Request: file is too big")
        return {
            "file_id": stored.file_id,
            "file_unique_id": stored.file_unique_id,
            "file_size": stored.file_size,
            "file_path": stored.file_path,
        }

    def _media_sender(self, kind: str) -> Callable[[Call], dict[str, Any]]:
        def send(call: Call) -> dict[str, Any]:
            params = call.params
            chat = self._chat(params)
            thread = self._check_send(chat, params, call)
            value = params.get(kind)
            file_name: str | None = None
            mime_type: str | None = None
            if kind in call.files:
                file_name, content = call.files[kind]
            elif isinstance(value, str) and value.startswith("attach://"):
                attached = call.files.get(value.removeprefix("attach://"))
                if attached is None:
                    raise ApiError(400, f"Bad Request: there is no {kind} in the request")
                file_name, content = attached
            elif isinstance(value, str) and value:
                known = self._files.get(value)
                if known is None:
                    raise ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
                content = known.content
            else:
                raise ApiError(400, f"Bad Request: there is no {kind} in the request")
            if file_name and "." in file_name:
                mime_type = mimetypes.guess_type(file_name)[0]
            duration = 2
            if kind == "voice":
                try:
                    duration = max(1, round(ogg_opus_seconds(content)))
                except NotOggOpus as exc:
                    # fake's wording: Telegram shows only OGG/Opus as a voice bubble
                    raise ApiError(400, f"Bad Request: voice must be OGG/Opus ({exc})") from exc
                mime_type = "audio/ogg"
            caption = params.get("caption")
            visible_caption = None
            if caption is not None:
                visible_caption, _ = self._render(
                    str(caption), params.get("parse_mode"), text_method=False
                )
                if utf16_len(visible_caption) > MAX_CAPTION_LENGTH:
                    raise ApiError(400, "Bad Request: message caption is too long")
            self._check_rate(int(chat["id"]))
            message = self._bot_message(chat, thread, params, call)
            message[kind] = self._media_object(
                kind, content, file_name, mime_type, duration=duration
            )
            if visible_caption:
                message["caption"] = visible_caption
            self._register_message(message)
            return message

        return send

"""The store's typed rows of conversations: messages, sessions, chats, media, what a turn reads
first, the replies waiting for delivery, usage to book and a ``/forget`` operation — frozen
dataclasses the gateway reads by attribute. Beside it: search and vectors
(``bot/store/search_rows.py``), people and the owner's bookkeeping (``bot/store/admin_rows.py``),
workers and leases (``bot/store/worker_rows.py``). Backends build these from their own rows;
nothing here knows SQL."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from bot.store.admin_rows import UserRow


@dataclass(frozen=True)
class MessageRow:
    id: int
    session_id: str | None
    partner_id: str | None
    chat_key: str
    platform_message_id: str | None
    user_key: str | None
    speaker: str
    role: str
    text: str
    audience: str
    status: str
    created_at: float


@dataclass(frozen=True)
class SessionRow:
    id: str
    partner_id: str | None
    chat_key: str
    user_key: str | None
    audience: str
    kind: str
    carry_from: str | None
    title: str
    system_prompt: str
    created_at: float
    last_active_at: float
    ended_at: float | None
    reviewed_upto: int
    review_attempts: int
    review_error: str | None
    review_due_at: float | None


@dataclass(frozen=True)
class DeliveryRetry:
    """Where a reply the platform refused for now stands."""

    message_id: int
    attempts: int
    first_failed_at: float
    next_attempt_at: float
    last_error: str


@dataclass(frozen=True)
class WaitingReply:
    """A reply that waits for a retry, with what names the queue key it is sent under."""

    message_id: int
    queue_key: str | None
    """The key of the turn that wrote it; None for one outside every queue (a greeting, a
    check-in), which goes under its partner's key of its chat."""
    partner_id: str | None


@dataclass(frozen=True)
class ChatRow:
    chat_key: str
    platform: str
    platform_chat_id: str
    thread_id: str | None
    kind: str
    title: str | None
    selected_partner: str | None


@dataclass(frozen=True)
class ForgetOperation:
    """One ``/forget``: what to remove, recorded before anything is removed (docs/architecture.md
    "Forgetting is an operation, not a loop"). ``texts`` are what the steps search for; they
    are cleared once the steps ran, when ``status`` moves from running to scrubbed; done
    means the search index and the WAL were cleaned up too. The counts answer the user."""

    partner_id: str
    user_key: str
    kind: str
    request: str | None = None
    """The command's platform message, so a redelivered command finds its operation."""
    entry_ids: tuple[str, ...] = ()
    hashes: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    session_ids: tuple[str, ...] = ()
    """Sessions whose title is one of the user's messages (``history``)."""
    entries: int = 0
    passages: int = 0
    messages: int = 0
    status: str = "running"
    id: int = 0


@dataclass(frozen=True)
class MediaRow:
    """A voice note or photo of a message (by platform file id), or an action of a reply:
    ``react`` (an emoji), ``sticker`` (a file id), ``speak`` (send it as a voice bubble)."""

    message_id: int
    kind: str
    ref: str
    mime: str | None = None
    seconds: float | None = None
    bytes: int | None = None
    filename: str | None = None
    state: str = "new"


@dataclass(frozen=True)
class NewToolCall:
    """An MCP tool call to keep with ``message_id``, the message its turn answered."""

    message_id: int
    chat_key: str
    session_id: str | None
    partner_id: str | None
    user_key: str
    server: str
    tool: str
    arguments: str
    result: str
    is_error: bool
    created_at: float


@dataclass(frozen=True)
class ToolCallRow(NewToolCall):
    """A stored MCP tool call."""


@dataclass(frozen=True)
class ConfirmationRow:
    """A question put to the person ``user_key`` in ``chat_key`` before a tool call, open
    until ``expires_at``; ``answer`` is None until they answer (True: yes)."""

    id: str
    chat_key: str
    user_key: str
    asked_at: float
    expires_at: float
    answer: bool | None = None


@dataclass(frozen=True)
class NewMedia:
    kind: str
    ref: str
    mime: str | None = None
    seconds: float | None = None
    bytes: int | None = None
    filename: str | None = None


@dataclass(frozen=True)
class NewMessage:
    """A message to record. ``dedup_key`` makes a repeated platform message a no-op."""

    chat_key: str
    role: str
    text: str
    audience: str
    status: str = "done"
    dedup_key: str | None = None
    queue_key: str | None = None
    session_id: str | None = None
    partner_id: str | None = None
    platform_message_id: str | None = None
    user_key: str | None = None
    speaker: str = ""
    created_at: float | None = None
    answers_upto: int | None = None
    """For a reply: the last inbound message it answers (what it quotes)."""
    media: tuple[NewMedia, ...] = ()
    """Stored with the message, in the same statement batch: a file id is never lost."""


@dataclass(frozen=True)
class NewUsage:
    """Tokens one model call spent, booked on a day for a partner (or the owner)."""

    day: str
    partner_id: str
    kind: str
    """chat, scene, gate, review, consult, checkin"""
    model: str
    prompt_tokens: int
    completion_tokens: int
    group_key: str | None = None
    """A scene's group (``platform:chat id``) whose daily budget the tokens count against too."""
    group_day: str | None = None
    """The day they count on there: the group's own calendar."""

    @property
    def per_partner(self) -> tuple[str, str, str, str, int, int]:
        """The ``usage`` row's values (:data:`bot.store.usage.ADD_USAGE`)."""
        return (
            self.day, self.partner_id, self.kind, self.model, self.prompt_tokens,
            self.completion_tokens,
        )  # fmt: skip

    @property
    def per_group(self) -> tuple[str | None, str | None, int | None]:
        """The ``group_usage`` row's values (:data:`bot.store.usage.ADD_GROUP_TOKENS`); all
        None for tokens spent outside a scene."""
        if self.group_key is None or self.group_day is None:
            return None, None, None
        return self.group_key, self.group_day, self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TurnContext:
    """What a turn of one queue key reads before the model runs, read together in one round
    trip: its pending messages and, for the last of them, the chat, the speaker, the chat's
    open session with that partner, that session's history, the media of all of these and
    the reactions since. Everything but ``pending`` and ``unfinished`` is empty when nothing is
    pending."""

    pending: list[MessageRow]
    chat: ChatRow | None = None
    user: UserRow | None = None
    session: SessionRow | None = None
    """The open session of the last pending message's chat and partner, stale or not."""
    history: list[MessageRow] = field(default_factory=list)
    """``session``'s conversation (user and assistant messages), oldest first."""
    carried: list[MessageRow] = field(default_factory=list)
    """The same of the session ``session`` carries turns from."""
    media: dict[int, list[MediaRow]] = field(default_factory=dict)
    """The media of the pending, history and carried messages, by message id."""
    reactions: list[MessageRow] = field(default_factory=list)
    """Users' reactions in the chat to the partner after ``reactions_after``, oldest first."""
    reactions_after: int = 0
    """The id of the last message of ``history`` (or ``carried``); 0 without either."""
    unfinished: list[int] = field(default_factory=list)
    """The queue key's replies recorded but not delivered, with no retry of their own
    waiting (a delivery an outage, a lost lease or a dead worker cut off), oldest first: the
    worker finishes them before it answers what is pending. Read also when nothing is."""


@dataclass(frozen=True)
class DocumentRow:
    """A memory document kept as a row: its bytes exactly as written, and a version that
    counts its writes (a write names the version it replaces)."""

    content: bytes
    version: int
    updated_at: float


def new_session_id() -> str:
    return uuid.uuid4().hex

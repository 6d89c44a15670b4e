"""The store's typed rows: what its methods take and return. Frozen dataclasses for the rows
the gateway reads by attribute; ``TypedDict``s for the rows it has always read as dicts
(``row["display_name"]``), so those callers keep working and are type-checked all the same.
Backends build these from their own rows; nothing here knows SQL."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, TypedDict


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
class SearchHit:
    message_id: int
    session_title: str
    role: str
    text: str
    created_at: float
    platform_message_id: str | None


@dataclass(frozen=True)
class EmbeddingWork:
    """The background embedder's next batch: (message id, text) pairs, and the watermark
    to record once they are embedded."""

    texts: tuple[tuple[int, str], ...]
    upto: int


@dataclass(frozen=True)
class NewVector:
    """A message's vector (float32 bytes), with the text it was made from."""

    message_id: int
    text: str
    dim: int
    vector: bytes


@dataclass(frozen=True)
class StoredVector:
    """A vector as the in-memory vector cache keeps it: its message, that message's scope
    token, time and speaker (what a search filters by), and the float32 bytes."""

    message_id: int
    scope: str
    created_at: float
    speaker: str
    vector: bytes


@dataclass(frozen=True)
class VectorChanges:
    """What the vector log says changed after a position: ``seq`` is its position now;
    ``message_ids`` the messages whose vector (or pending state) changed since, or None when
    the log no longer reaches back that far (whoever cached vectors must read them again)."""

    seq: int
    message_ids: tuple[int, ...] | None


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
    """chat, review, consult, checkin"""
    model: str
    prompt_tokens: int
    completion_tokens: int


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


# ---- rows read as dicts ----------------------------------------------------------------


class UserRow(TypedDict):
    """A person on one platform (``users``)."""

    user_key: str
    platform: str
    platform_user_id: str
    display_name: str
    username: str | None
    access: str
    """unknown, allowed, blocked (bot/gateway/access.py)"""
    timezone: str | None
    created_at: float
    updated_at: float
    voice_mode: str | None


class BindingRow(TypedDict):
    """A group or channel bound to a partner, from config.toml or ``/admin bind``."""

    platform: str
    chat_id: str
    partner_id: str
    source: str
    """config or command"""


class PairingRow(TypedDict):
    """A stranger's request to talk to the partners, decided by the owner."""

    code: str
    user_key: str
    created_at: float
    expires_at: float
    status: str
    """pending, approved, denied"""
    announced_at: float | None


class ClaimedOwnerRow(TypedDict):
    """A user who became the owner of a platform with a claim code."""

    user_key: str
    platform: str
    claimed_at: float


class AuditRow(TypedDict):
    time: float
    actor: str
    action: str
    detail: dict[str, Any]


class UsageRow(TypedDict):
    """One day's calls of one kind on one model for one partner."""

    day: str
    partner_id: str
    kind: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    units: float


class CheckinSetting(TypedDict):
    """Whether a partner may check in on a user."""

    partner_id: str
    user_key: str
    enabled: int
    unanswered: int
    last_sent_at: float | None
    disabled_reason: str | None


class CheckinCandidate(TypedDict):
    """An opted-in user with what the check-in gates need (partners/checkins.py)."""

    user_key: str
    timezone: str | None
    last_message: float | None
    last_checkin: float | None
    today: int
    this_week: int


class ReminderRow(TypedDict):
    """A dated thing a partner promised to bring up again."""

    id: int
    partner_id: str
    user_key: str
    due_date: str
    about: str
    status: str
    created_at: float


class RestNoticeRow(TypedDict):
    """When a "resting" notice (a budget ran out) was last sent for a subject."""

    kind: str
    subject: str
    sent_at: float


@dataclass(frozen=True)
class Lease:
    """A worker's claim on one queue key's pending turns (docs/architecture.md "Several workers"):
    the
    epoch grows with every new holder, so a write under an older epoch is refused."""

    queue_key: str
    worker_id: str
    epoch: int
    expires_at: float
    """When it lapses, on the database's clock (seconds since the epoch)."""


@dataclass(frozen=True)
class ShardLease:
    """A worker's claim on one of the Discord bot's shards (docs/architecture.md "Several workers":
    Discord shards are leases too): only its holder connects that shard. A bot with another
    shard count has other shards, so the count is part of the key; the epoch grows with every
    new holder."""

    shard_count: int
    shard_id: int
    worker_id: str
    epoch: int
    expires_at: float
    """When it lapses unless renewed, on the database's clock."""


@dataclass(frozen=True)
class Leader:
    """The worker elected to run the Telegram poller, the scheduler and command sync; its
    epoch grows with every new leader and fences every leader-only write."""

    worker_id: str
    epoch: int
    expires_at: float
    """When it lapses unless renewed, on the database's clock."""


@dataclass(frozen=True)
class WorkerRow:
    """A gateway worker as the registry knows it (``/admin status``)."""

    worker_id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    leases: int
    """How many queue keys it holds a live lease on."""
    alive: bool | None = None
    """On PostgreSQL, whether its liveness lock is held right now (False: it died or has
    not locked since the server restarted); None where that is not known (SQLite)."""

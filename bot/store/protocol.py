"""The store interface: every read and write of the gateway's database, whatever the backend.

The gateway, the partners and the CLI are written against :class:`Store` and never see SQL or
a driver; a backend implements it (:class:`bot.store.sqlite.SqliteStore`, the embedded default,
and :class:`bot.store.postgres.store.PostgresStore`, which several workers share). Rows come
back as the types in :mod:`bot.store.rows`; a database that cannot work raises from
:mod:`bot.store.errors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from bot.store.postgres.connection import is_database_url
from bot.store.postgres.store import PostgresStore
from bot.store.rows import (
    AuditRow,
    BindingRow,
    ChatRow,
    CheckinCandidate,
    CheckinSetting,
    ClaimedOwnerRow,
    DeliveryRetry,
    DocumentRow,
    EmbeddingWork,
    ForgetOperation,
    Leader,
    Lease,
    MediaRow,
    MessageRow,
    NewMedia,
    NewMessage,
    NewUsage,
    NewVector,
    PairingRow,
    ReminderRow,
    RestNoticeRow,
    SearchHit,
    SessionRow,
    StoredVector,
    TurnContext,
    UsageRow,
    UserRow,
    VectorChanges,
    WorkerRow,
)
from bot.store.sqlite import SqliteStore
from bot.store.workers import Liveness


class Store(Protocol):
    """The gateway's database: users and chats, messages and their search index, the work
    queue, sessions and review state, forget operations, usage and the audit log."""

    @classmethod
    async def open(cls, location: Path | str) -> Store:
        """The store in the database at ``location``, created or migrated to the current
        schema as needed: a ``postgresql://`` URL opens PostgreSQL, anything else is the path
        of a SQLite file (``Config.database`` says which the config asks for)."""
        if is_database_url(location):
            return await PostgresStore.open(str(location))
        return await SqliteStore.open(Path(location))

    async def close(self) -> None: ...

    async def schema_version(self) -> int:
        """How many schema steps the database has applied."""

    async def backup_to(self, target: Path) -> None:
        """A consistent copy of the live database in the file ``target`` (SQLite; PostgreSQL
        raises :class:`StoreError` saying to use pg_dump)."""

    @property
    def round_trips(self) -> int:
        """Trips to the database so far, the figure store speed is measured in."""

    # ---- users, pairings, owner claims -------------------------------------------------------

    async def upsert_user(
        self, user_key: str, platform: str, platform_user_id: str, name: str, username: str | None
    ) -> None: ...

    async def user(self, user_key: str) -> UserRow | None: ...

    async def set_user_access(self, user_key: str, access: str) -> bool: ...

    async def voice_mode(self, user_key: str) -> str | None: ...

    async def set_voice_mode(self, user_key: str, mode: str) -> None: ...

    async def set_user_timezone(self, user_key: str, timezone: str) -> None: ...

    async def create_pairing(self, code: str, user_key: str, ttl_seconds: float) -> None: ...

    async def live_pairings(self, user_key: str | None = None) -> list[PairingRow]: ...

    async def pairing(self, code: str) -> PairingRow | None: ...

    async def close_pairing(self, code: str, status: str) -> None: ...

    async def unannounced_approvals(self) -> list[PairingRow]:
        """Pairing requests approved (from the terminal) whose user has not been told yet."""

    async def take_announcement(self, code: str) -> bool:
        """Claim the telling of an approval: True for exactly one caller."""

    async def add_claim_code(self, code_hash: str, platform: str, ttl_seconds: float) -> None: ...

    async def live_claim_codes(self, platform: str) -> list[str]:
        """Hashes of the codes that may still claim ``platform`` (unused, unexpired)."""

    async def redeem_claim(self, code_hash: str, platform: str, user_key: str) -> bool:
        """Make ``user_key`` the owner of ``platform`` with a live code, in one transaction:
        False if the code is no longer live or the platform has been claimed meanwhile. Every
        other code for the platform is used up with it."""

    async def claimed_owners(self) -> list[ClaimedOwnerRow]: ...

    async def web_users(self) -> list[dict[str, Any]]:
        """Every user the gateway has seen, newest first, with their check-in settings."""

    # ---- chats -------------------------------------------------------------------------------

    async def upsert_chat(
        self,
        chat_key: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        kind: str,
        title: str | None,
    ) -> None: ...

    async def chat(self, chat_key: str) -> ChatRow | None: ...

    async def chat_and_user(
        self, chat_key: str, user_key: str
    ) -> tuple[ChatRow | None, UserRow | None]:
        """A chat and one of its people, read in one round trip (a turn needs both)."""

    async def selected_partner(self, chat_key: str) -> str | None: ...

    async def select_partner(self, chat_key: str, partner_id: str | None) -> None: ...

    async def bind(self, platform: str, chat_id: str, partner_id: str, source: str) -> bool: ...

    async def unbind(self, platform: str, chat_id: str, partner_id: str | None) -> int: ...

    async def bindings(
        self, platform: str | None = None, chat_id: str | None = None
    ) -> list[BindingRow]: ...

    async def replace_config_bindings(self, rows: Iterable[tuple[str, str, str]]) -> None: ...

    # ---- messages ----------------------------------------------------------------------------

    async def update_seen(self, platform: str, update_id: str) -> bool:
        """Whether :meth:`seen_update` recorded this platform update id (read only)."""

    async def seen_update(self, platform: str, update_id: str) -> bool:
        """Record a platform update id; True if it was recorded before (a duplicate)."""

    async def reject_update(self, platform: str, update_id: str) -> None:
        """Record a platform update the gateway could not read: skipped like a handled one
        if it comes again, and listed by :meth:`rejected_updates`."""

    async def rejected_updates(self, platform: str) -> list[str]:
        """Ids of the updates recorded by :meth:`reject_update`, oldest first."""

    async def add_message(self, message: NewMessage) -> int | None:
        """Record a message and index it; None if its dedup key was recorded before."""

    async def add_message_with_media(self, message: NewMessage) -> int | None:
        """:meth:`add_message` for a message with media: both in one transaction."""

    async def add_messages(self, messages: Sequence[NewMessage]) -> list[int | None]: ...

    async def message(self, message_id: int) -> MessageRow | None: ...

    async def session_messages(
        self, session_id: str, roles: Sequence[str] = ("user", "assistant"), after_id: int = 0
    ) -> list[MessageRow]: ...

    async def recent_context(self, chat_key: str, after_id: int, limit: int) -> list[MessageRow]:
        """Unaddressed group chatter since ``after_id``, oldest first, at most ``limit``."""

    async def recent_reactions(
        self, chat_key: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[MessageRow]:
        """Users' reactions to a partner's messages since ``after_id``, oldest first."""

    async def last_inbound_at(self, chat_key: str) -> float | None:
        """When the newest stored inbound message of a chat was written (platform time)."""

    async def set_message_text(
        self, message_id: int, text: str, media: tuple[str, str, str] | None = None
    ) -> None:
        """Replace a message's text (a transcript, a photo's description), index included;
        ``media`` (kind, ref, state) is the state of the medium it came from, set with it.
        The update trigger re-indexes the row; its neighbours' context columns are rewritten."""

    async def partner_messages(self, partner_id: str) -> list[MessageRow]:
        """Every recorded message of a partner, session by session (for an export)."""

    async def reply_counts(self, since: float) -> dict[str, int]:
        """Replies recorded since a time: 'assistant' answers and 'notice' apologies."""

    # ---- the work queue and delivery ---------------------------------------------------------

    async def pending_queue_keys(self) -> list[str]: ...

    async def pending(self, queue_key: str) -> list[MessageRow]: ...

    async def turn_context(self, queue_key: str, reactions: int) -> TurnContext:
        """The pending messages of ``queue_key`` and what answering them needs: the chat, the
        speaker, the open session of the last one's chat and partner with its history (and
        the carried one's), their media and at most ``reactions`` reactions since, and the
        key's unfinished replies — one round trip (see :class:`TurnContext`)."""

    async def pending_count(self) -> int: ...

    async def finish_turn(
        self,
        inbound_ids: Sequence[int],
        session_id: str | None,
        reply: NewMessage,
        inbound_status: str = "done",
        usage: NewUsage | None = None,
        *,
        lease: Lease | None = None,
    ) -> int:
        """Close the inbound messages and record the reply, in one transaction, with the
        tokens the reply cost (``usage``) if given. Without a session the inbound messages
        stay out of every session's history.

        Every write that commits a turn's outcome takes the ``lease`` the turn runs under and
        checks it in the same transaction: if another worker took the queue key over, it
        raises :class:`LeaseLost` and writes nothing (None: no lease fences the write). The
        reply joins the lease's queue key: if its delivery is cut off, the key stays
        claimable until its holder finished it (:attr:`TurnContext.unfinished`)."""

    async def count_failed_turn(
        self, message_ids: Sequence[int], *, lease: Lease | None = None
    ) -> int:
        """Count a turn that raised against each of its messages that is still pending; the
        highest count, or 0 when none is pending any more (the turn had recorded its reply)."""

    async def turn_attempts(self, message_id: int) -> int:
        """How many turns raised while this message waited for its answer."""

    async def assign_session(self, message_ids: Sequence[int], session_id: str) -> None: ...

    async def close_unanswered(
        self, message_ids: Sequence[int], session_id: str, *, lease: Lease | None = None
    ) -> None:
        """Keep messages in their session's history without a reply (a resting partner)."""

    async def mark_delivered(self, message_id: int, *, lease: Lease | None = None) -> None: ...

    async def set_status(self, message_id: int, status: str) -> None: ...

    async def mark_failed(self, message_id: int, *, lease: Lease | None = None) -> None: ...

    async def interrupted_deliveries(self) -> list[int]:
        """Replies outside every queue (greetings, check-ins) that a stop or crash cut off
        while they were being sent (none waits for a retry of its own: those are the retry
        loop's). A turn's reply is in its queue key's :attr:`TurnContext.unfinished`."""

    async def delivery_retry(self, message_id: int) -> DeliveryRetry | None: ...

    async def schedule_delivery_retry(
        self, retry: DeliveryRetry, *, lease: Lease | None = None
    ) -> None: ...

    async def chats_with_due_retries(self, now: float) -> list[str]:
        """Chats with a reply whose next attempt is due, the one waiting longest first."""

    async def next_delivery_retry_at(self) -> float | None: ...

    async def waiting_replies(self, chat_key: str, before_id: int | None = None) -> list[int]:
        """Replies of a chat that wait for a retry (older than ``before_id``), oldest first."""

    async def delivered_chunks(self, message_id: int) -> int: ...

    async def record_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None: ...

    async def record_last_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None:
        """:meth:`record_chunk` for a reply's last chunk and :meth:`mark_delivered`, in one
        transaction and one round trip."""

    async def answered_message(self, reply_id: int) -> MessageRow | None:
        """The last inbound message a reply answers (what the reply should quote)."""

    async def reply_for_platform_message(
        self, chat_key: str, platform_message_id: str
    ) -> MessageRow | None:
        """The reply one of whose chunks is this platform message, if any."""

    # ---- media -------------------------------------------------------------------------------

    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        """The media (or reply actions) of these messages, in the order they were stored."""

    async def add_media(self, message_id: int, media: Sequence[NewMedia]) -> None: ...

    async def set_media_state(self, message_id: int, kind: str, ref: str, state: str) -> None: ...

    # ---- sessions ----------------------------------------------------------------------------

    async def open_session(self, chat_key: str, partner_id: str | None) -> SessionRow | None: ...

    async def latest_session(
        self, chat_key: str, partner_id: str | None, kind: str = "chat"
    ) -> SessionRow | None: ...

    async def create_session(
        self,
        *,
        partner_id: str | None,
        chat_key: str,
        user_key: str | None,
        audience: str,
        system_prompt: str,
        title: str = "",
        kind: str = "chat",
        carry_from: str | None = None,
        session_id: str | None = None,
    ) -> SessionRow: ...

    async def session(self, session_id: str) -> SessionRow | None: ...

    async def set_session_title(self, session_id: str, title: str) -> None: ...

    async def end_session(self, session_id: str, reason: str) -> None: ...

    async def end_chat_sessions(self, chat_key: str, reason: str) -> list[str]:
        """End this chat's open sessions, its consult thread included."""

    async def sessions_of(self, partner_id: str, limit: int = 50) -> list[SessionRow]: ...

    async def find_sessions(self, partner_id: str, id_prefix: str) -> list[SessionRow]:
        """A partner's sessions whose id starts with ``id_prefix`` (ids are shown shortened)."""

    async def partner_sessions(
        self, partner_id: str, user_key: str | None = None, limit: int = 500
    ) -> list[SessionRow]:
        """A partner's sessions, newest activity first, optionally only one user's."""

    async def message_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Conversation messages (user and assistant) per session."""

    async def last_activity(self) -> dict[str, float]:
        """When each partner last had a conversation."""

    async def add_transcript_ref(self, session_id: str, referenced_id: str, keep: int) -> None:
        """Reference a session's transcript from an owner session; only the newest ``keep``
        references of that session stay."""

    async def transcript_refs(self, session_id: str) -> list[str]:
        """The sessions referenced from ``session_id``, oldest first."""

    async def count_sessions(self, chat_key: str, partner_id: str) -> int:
        """How many conversations this chat has had with this partner."""

    # ---- review state ------------------------------------------------------------------------

    async def mark_review_due(self, session_id: str, at: float) -> None:
        """Ask for a review at ``at``; an earlier request stands (that is the debounce)."""

    async def due_reviews(self, now: float) -> list[SessionRow]: ...

    async def sessions_to_review(
        self, *, idle_before: float | None = None, partner_id: str | None = None
    ) -> list[SessionRow]:
        """Sessions holding conversation newer than their review watermark."""

    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None:
        """Advance the watermark to ``upto`` and clear the due time and the failures; with
        ``claim``, only while that review claim is held (:class:`LeaseLost` otherwise, and
        nothing is written)."""

    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        """Count a failed attempt (the watermark stays) and ask again at ``retry_at``; the
        attempts so far. With ``claim``, only while it is held (:class:`LeaseLost`)."""

    async def last_reviews(self) -> dict[str, float]:
        """When each partner's sessions were last reviewed."""

    # ---- search ------------------------------------------------------------------------------

    async def search(
        self,
        partner_id: str,
        query: str,
        audiences: Sequence[str] | None,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[SearchHit]:
        """Best matches first (BM25, newer first on ties) among the given audiences."""

    async def set_search_language(self, partner_id: str, language: str) -> int:
        """Stem this partner's history in ``language`` from now on (a Snowball name, see
        ``search_language``); a change re-indexes what is stored. Returns messages re-indexed."""

    # ---- what a user owns, forgetting --------------------------------------------------------

    async def add_tombstones(
        self, partner_id: str, user_key: str, hashes: Iterable[str]
    ) -> None: ...

    async def tombstones(self, partner_id: str, user_key: str) -> set[str]: ...

    async def user_messages(self, partner_id: str, user_key: str) -> list[MessageRow]:
        """A user's messages with a partner and the partner's replies in their DMs."""

    async def user_message_ids(
        self, partner_id: str, user_key: str, roles: Sequence[str]
    ) -> list[int]:
        """A user's finished messages (of these roles) with a partner, their DM replies too."""

    async def journal_messages(self, partner_id: str) -> list[MessageRow]:
        """Every journal entry of a partner as search indexes it."""

    async def delete_messages(self, message_ids: Sequence[int]) -> int:
        """The one way a message leaves the store: the row, (by the delete trigger) its search
        index entry, and the copies of its words in its neighbours' context columns. Returns
        how many were still there."""

    async def forget_session_prompts(self, partner_id: str, user_key: str) -> None:
        """Frozen prompts hold the user's memory as it was: end those sessions and drop it."""

    async def sessions_titled_by(self, partner_id: str, user_key: str) -> list[str]:
        """A user's DM sessions with a partner, and group sessions opened by their message:
        a session's title is its first message."""

    async def clear_session_titles(self, session_ids: Sequence[str]) -> None: ...

    async def user_reminders(self, partner_id: str, user_key: str) -> list[ReminderRow]: ...

    async def delete_reminders(self, reminder_ids: Sequence[int]) -> None: ...

    async def begin_forget(self, operation: ForgetOperation) -> ForgetOperation:
        """Record a forget operation and its tombstones, in one transaction, before anything
        is removed (a ``request`` is recorded once: look it up first)."""

    async def forget_operation(self, request: str) -> ForgetOperation | None: ...

    async def unfinished_forgets(
        self, partner_id: str | None = None, user_key: str | None = None
    ) -> list[ForgetOperation]:
        """Operations a crash or a failed step left behind, oldest first."""

    async def forget_scrubbed(self, operation_id: int) -> None:
        """Every copy is gone: the operation keeps no text of its own any more."""

    async def forget_done(self, operation_id: int) -> None: ...

    async def erase_deleted_text(self) -> bool:
        """After forgetting: rebuild the search index's segments without the deleted rows'
        terms (an FTS5 delete only adds a marker; the terms stay in the old segments until a
        merge) and checkpoint the WAL into the database, truncating it, so no older page
        image keeps the text either. False if a reader kept the checkpoint from finishing."""

    # ---- check-ins and reminders -------------------------------------------------------------

    async def set_checkins(
        self, partner_id: str, user_key: str, enabled: bool, reason: str | None = None
    ) -> None: ...

    async def checkin_candidates(
        self, partner_id: str, day_start: float, week_start: float
    ) -> list[CheckinCandidate]:
        """Every opted-in user of a partner with what the check-in gates need, in one query."""

    async def checkin_partners(self, user_key: str) -> list[str]: ...

    async def checkin_setting(self, partner_id: str, user_key: str) -> CheckinSetting | None: ...

    async def record_checkin(
        self, partner_id: str, user_key: str, kind: str, silent: bool, at: float
    ) -> None: ...

    async def checkins_since(self, partner_id: str, user_key: str, since: float) -> int:
        """Check-ins actually sent (not silent) since a time."""

    async def last_user_message_at(self, partner_id: str, user_key: str) -> float | None: ...

    async def add_reminder(
        self, partner_id: str, user_key: str, due_date: str, about: str
    ) -> bool: ...

    async def pending_reminders(self) -> list[ReminderRow]: ...

    async def close_reminder(self, reminder_id: int, status: str) -> bool:
        """Mark a reminder done; False if another run already did (it fires once)."""

    # ---- usage and budgets -------------------------------------------------------------------

    async def add_usage(
        self, day: str, partner_id: str, kind: str, model: str, prompt: int, completion: int
    ) -> None: ...

    async def add_units(
        self, day: str, partner_id: str, kind: str, model: str, units: float
    ) -> None:
        """Usage that is not tokens: transcribed seconds, spoken characters, images."""

    async def units_on(self, day: str) -> dict[str, dict[str, float]]:
        """Units (seconds, characters, images) used on one day, per partner and kind."""

    async def usage(self, since_day: str) -> list[UsageRow]: ...

    async def tokens_on(self, day: str) -> dict[str, int]:
        """Tokens (prompt + completion) used on one day, per partner."""

    async def user_messages_since(self, user_key: str, since: float) -> int: ...

    async def last_rest_notice(self, kind: str, subject: str) -> float | None: ...

    async def note_rest_notice(self, kind: str, subject: str) -> None: ...

    async def rest_notices_since(self, since: float) -> list[RestNoticeRow]: ...

    # ---- audit log and settings --------------------------------------------------------------

    async def audit(self, actor: str, action: str, **detail: Any) -> None: ...

    async def audit_rows(self, action: str | None = None, limit: int = 100) -> list[AuditRow]: ...

    async def settings(self) -> dict[str, str]: ...

    async def put_setting(self, key: str, value: str) -> None: ...

    async def delete_setting(self, key: str) -> bool: ...

    # ---- semantic recall: vectors --------------------------------------------------------------

    @property
    def new_searchable(self) -> asyncio.Event:
        """Set when a searchable message is stored or its text changes (the background
        embedder waits on it and clears it)."""
        ...

    async def embedding_work(self, model: str, limit: int) -> EmbeddingWork:
        """The background embedder's next batch of ``model``'s messages."""

    async def embedding_watermark(self, model: str) -> int: ...

    async def save_vectors(
        self, model: str, vectors: Sequence[NewVector], upto: int | None = None
    ) -> int:
        """Keep vectors whose messages still hold the text they were made from."""

    async def skip_embedding(self, message_ids: Sequence[int]) -> None: ...

    async def embedding_backlog(self, model: str) -> int: ...

    async def unembedded(
        self, model: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[tuple[int, str]]: ...

    async def vector_candidates(
        self,
        partner_id: str,
        audiences: Sequence[str] | None,
        model: str,
        dim: int,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[tuple[int, bytes]]:
        """The vectors a search may compare: the lexical search's visibility rule, in SQL."""

    async def search_hits(self, message_ids: Sequence[int]) -> dict[int, SearchHit]: ...

    async def audit_page(
        self, search: str = "", before_id: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Audit rows newest first, ``limit`` at a time below ``before_id``."""

    # ---- the web page's logins -------------------------------------------------------------------

    async def add_web_login(self, token_hash: str, ttl_seconds: float) -> None: ...

    async def redeem_web_login(
        self, token_hash: str, session_hash: str, csrf_token: str, ttl_seconds: float
    ) -> bool:
        """Use up a live login link and open a session with it: False when the link is
        unknown, expired or used already."""

    async def web_session(self, session_hash: str) -> dict[str, Any] | None: ...

    async def end_web_sessions(self, session_hash: str | None = None) -> int: ...
    async def search_scopes(self, partner_id: str, audiences: Sequence[str] | None) -> list[str]:
        """The scope tokens of the audiences a search may see (None: all of the partner's)."""

    async def vector_log_position(self) -> int:
        """Where the vector log stands now (read before the vectors it covers)."""

    async def vector_changes(self, after_seq: int) -> VectorChanges:
        """Messages whose vector or pending state changed after ``after_seq``."""

    async def stored_vectors(
        self,
        partner_id: str,
        model: str,
        dim: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        message_ids: Sequence[int] | None = None,
    ) -> list[StoredVector]:
        """A partner's searchable, finished messages' vectors of ``model`` and ``dim``, by id."""

    # ---- workers, the leader, leases (DESIGN.md "Several workers") ------------------------

    async def register_worker(self, worker_id: str, host: str, pid: int) -> None:
        """Enter a starting worker in the registry; whatever an earlier process under the
        same id held (leases, the leadership) is let go, since a fresh worker holds nothing."""

    async def heartbeat(
        self, worker_id: str, lease_seconds: float, leases: Sequence[Lease]
    ) -> list[Lease]:
        """The worker is alive: its registry row is stamped and each of ``leases`` (those it
        holds and knows about) that it still holds under that epoch is renewed for
        ``lease_seconds``; the ones renewed (one taken over is missing). A lease row under
        its id that it did not name is given back: no task of it works on that key. On
        PostgreSQL it also gives back what dead workers held (see :meth:`hold_liveness`)."""

    async def leave(self, worker_id: str) -> None:
        """A worker stopping cleanly: its leases are released, its leadership lapses at once
        (so another worker takes over without waiting for the expiry) and its row goes."""

    async def workers(self) -> list[WorkerRow]:
        """The registered workers, oldest first, with how many live leases each holds."""

    async def forget_workers_before(self, heartbeat_at: float) -> int:
        """Drop registry rows of workers silent since before ``heartbeat_at``; how many."""

    async def claim_queue_keys(
        self, worker_id: str, lease_seconds: float, limit: int, queue_key: str | None = None
    ) -> list[Lease]:
        """Lease up to ``limit`` queue keys that have pending messages or an unfinished reply
        (:attr:`TurnContext.unfinished`) and no live lease, for ``lease_seconds``, each under
        a new epoch. Two workers claiming at once never get the same key (PostgreSQL: ``FOR
        UPDATE SKIP LOCKED``; SQLite: one writer). An expired lease, or on PostgreSQL one
        whose holder died, is taken over like a free one. With ``queue_key``, only that key,
        and also if this worker's own live lease holds it (taken again under a new epoch)."""

    async def claim_review(
        self, worker_id: str, session_id: str, lease_seconds: float
    ) -> Lease | None:
        """Claim the review of one session (a lease on :func:`review_key`) for
        ``lease_seconds`` under a new epoch, unless a live claim holds it — this worker's own
        too: one review of a session runs at a time. The heartbeat renews it like any lease
        of the worker's; :meth:`release_leases` gives it back."""

    async def claim_due_reviews(
        self, worker_id: str, lease_seconds: float, due_by: float, limit: int
    ) -> list[Lease]:
        """Claim up to ``limit`` reviews due by ``due_by`` whose claim is free (never taken,
        released, or lapsed because its worker died), the longest due first. Two workers
        claiming at once never get the same review."""

    async def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a lease still held under its epoch; :class:`LeaseLost` if it was taken
        over (checked before each chunk is sent)."""

    async def release_leases(self, leases: Sequence[Lease]) -> None:
        """Give leases back (their keys have nothing pending); their epochs are kept, so the
        next holder's is higher. A lease already taken over (or taken again) is left alone."""

    async def lease(self, queue_key: str) -> Lease | None:
        """The lease row of a queue key (a released one has no worker and has expired)."""

    async def lead(self, worker_id: str, lease_seconds: float) -> Leader:
        """Take or renew the leadership for ``lease_seconds`` if it is free, lapsed, its
        holder died (PostgreSQL) or it is this worker's own; the leader row afterwards,
        whoever holds it. Renewing a live leadership keeps its epoch; taking one that lapsed
        (or whose holder died) bumps it."""

    async def leader(self) -> Leader | None:
        """The leader row, if any worker has ever led."""

    async def record_job_run(self, job: str, due: str, leader: Leader) -> bool:
        """Record that scheduled ``job`` runs for its ``due`` time, fenced by the leader's
        epoch (:class:`LeaseLost` if another worker leads now); False if some leader already
        ran it for that time, so no job runs twice across a failover."""

    async def hold_liveness(
        self, worker_id: str, wake: Callable[[str], None], lost: Callable[[], None]
    ) -> Liveness:
        """Hold the registered worker's liveness for as long as it runs. On PostgreSQL: a
        connection of its own holds a session advisory lock named in the worker's registry
        row — when the worker dies its socket closes, the lock goes, and what it held is free
        at once — and calls ``wake(queue_key)`` when any worker stores a pending message
        (LISTEN/NOTIFY: a wake-up only, the rows are the truth); ``lost()`` is called when
        that connection goes, and :meth:`Liveness.reopen` takes a new one. SQLite has one
        worker, which wakes itself: nothing is held."""

    # ---- memory documents as rows ------------------------------------------------------------

    async def document(self, namespace: str, path: str) -> DocumentRow | None:
        """A memory document kept as a row (``namespace``: its root relative to the data
        directory, ``path``: its name inside it); None when there is none."""

    async def save_document(
        self, namespace: str, path: str, content: bytes, expected_version: int
    ) -> int | None:
        """Write the document if it is at ``expected_version`` (0: not there yet); its new
        version, or None when someone wrote it since (nothing written)."""

    async def append_document(self, namespace: str, path: str, content: bytes) -> int:
        """Add bytes at the end of the document (created if missing); its new version."""

    async def document_paths(self, namespace: str, folder: str) -> list[str]:
        """The documents directly inside ``folder`` of the namespace, sorted."""

    async def delete_document(self, namespace: str, path: str) -> bool: ...

    def document_lock(self, namespace: str, path: str) -> AbstractAsyncContextManager[None]:
        """Held across one writer's read-modify-write of the document (across workers, on a
        database that several share)."""

"""The store's rows about people and the owner's bookkeeping: users, bindings, pairings, owner
claims, the audit log, usage, check-ins, reminders and rest notices. They are ``TypedDict``s:
the gateway has always read them as dicts (``row["display_name"]``), so those callers keep
working and are type-checked all the same."""

from __future__ import annotations

from typing import Any, TypedDict


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

"""The memory settings in effect: config.toml's ``[memory]`` overlaid with the owner's overrides.

``/admin settings <key> <value>`` stores an override in the store's settings table, so it survives
restarts and wins over config.toml (docs/architecture.md "Decisions": state). Values go through the
same :class:`~bot.config.memory.MemoryConfig` model as the config file, so a review threshold of 0,
a negative number or a non-number falls back to its default exactly as it would there (seed 003: a
threshold of 0 would review on every turn). When a change applies (seed 003): review thresholds on
the next trigger — the reviewer reads :meth:`Settings.memory` every time — and the prompt budget
from the next session, because prompts are frozen per session."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bot.config.memory import MemoryConfig
from bot.store import Store

logger = logging.getLogger(__name__)

KEY_PREFIX = "memory."
SETTABLE: dict[str, str] = {
    "auto_memory": "automatic review on/off (turn-end reviews at once; the sweep and the "
    "nightly job follow at the next start)",
    "review_turns": "review after this many un-reviewed human turns (next trigger)",
    "review_chars": "...or this many new characters (next trigger)",
    "review_model": "model for reviews; 'default' uses the session's own (next review)",
    "context_budget": "persona + memory characters before a condense notice (next session)",
    "budget_notice": "add that notice to the prompt (next session)",
    "history_chars": "characters of history sent with each turn (next turn)",
    "session_idle_hours": "a conversation ends after this much silence (next message)",
    "session_max_hours": "...or once its prompt is this old (next message)",
    "carry_turns": "turns carried into a new conversation (next session)",
    "idle_review_minutes": "review a session after this many idle minutes (next sweep)",
}
"""What the owner may change from the DM; ``nightly`` and ``changelog_keep`` need a restart
and stay in config.toml."""
FALLBACK_KEYS = ("review_turns", "review_chars", "context_budget")
"""Keys whose bad values fall back to the default (MemoryConfig's positive_or_default)."""
RESET_WORDS = ("default", "reset")
TRUE_WORDS = ("true", "on", "yes", "1")
FALSE_WORDS = ("false", "off", "no", "0")


class SettingError(ValueError):
    """A setting was refused; the message names the key and what it accepts."""


@dataclass(frozen=True)
class SettingChange:
    key: str
    value: Any
    fell_back: bool
    """The value given was not usable and the default is in effect instead."""


class Settings:
    """Effective memory settings, cached and refreshed whenever an override changes."""

    def __init__(self, base: MemoryConfig, store: Store) -> None:
        self.base = base
        self.store = store
        self._overrides: dict[str, Any] = {}
        self._effective = base

    def memory(self) -> MemoryConfig:
        return self._effective

    def overrides(self) -> dict[str, Any]:
        return dict(self._overrides)

    def source(self, key: str) -> str:
        if key in self._overrides:
            return "set here"
        return "config.toml" if key in self.base.model_fields_set else "default"

    async def load(self) -> None:
        """Read the stored overrides (at start); one that no longer validates is ignored."""
        overrides: dict[str, Any] = {}
        for key, raw in (await self.store.settings()).items():
            name = key.removeprefix(KEY_PREFIX)
            if not key.startswith(KEY_PREFIX) or name not in SETTABLE:
                continue
            try:
                overrides[name] = json.loads(raw)
                self._overlay(overrides)
            except (ValueError, ValidationError) as exc:
                logger.warning("ignoring the stored setting %s=%r: %s", key, raw, exc)
                overrides.pop(name, None)
        self._overrides = overrides
        self._effective = self._overlay(overrides)

    async def set(self, key: str, raw: str) -> SettingChange:
        if key not in SETTABLE:
            raise SettingError(f"{key!r} is not a setting here; settable: {', '.join(SETTABLE)}")
        if raw.lower() in RESET_WORDS:
            await self.reset(key)
            return SettingChange(key, getattr(self._effective, key), fell_back=False)
        parsed = _parse(key, raw)
        try:
            effective = self._overlay({**self._overrides, key: parsed})
        except ValidationError as exc:
            problem = "; ".join(error["msg"] for error in exc.errors())
            raise SettingError(f"{key} = {raw!r} refused: {problem}") from None
        value = getattr(effective, key)
        self._overrides[key] = value
        self._effective = effective
        await self.store.put_setting(KEY_PREFIX + key, json.dumps(value))
        return SettingChange(key, value, fell_back=key in FALLBACK_KEYS and value != parsed)

    async def reset(self, key: str) -> None:
        """Back to config.toml's value (or the default)."""
        self._overrides.pop(key, None)
        self._effective = self._overlay(self._overrides)
        await self.store.delete_setting(KEY_PREFIX + key)

    def _overlay(self, overrides: dict[str, Any]) -> MemoryConfig:
        return MemoryConfig.model_validate({**self.base.model_dump(), **overrides})


def _parse(key: str, raw: str) -> Any:
    """The typed value of ``raw`` for ``key``; bad numbers of FALLBACK_KEYS pass through so
    that MemoryConfig falls back to the default, as it does for config.toml."""
    kind = MemoryConfig.model_fields[key].annotation
    if kind is bool:
        if raw.lower() in TRUE_WORDS:
            return True
        if raw.lower() in FALSE_WORDS:
            return False
        raise SettingError(f"{key} takes true or false, not {raw!r}")
    if kind is int or kind is float:
        try:
            return kind(raw)
        except ValueError:
            if key in FALLBACK_KEYS:
                return raw
            raise SettingError(f"{key} takes a number, not {raw!r}") from None
    return raw

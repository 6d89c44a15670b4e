"""The ``[memory]`` settings as config.toml gives them: automatic review, the prompt's budget and
sessions. The owner's overrides on top of them are ``bot/config/memory_settings.py``."""

from __future__ import annotations

import logging

from pydantic import Field, ValidationInfo, field_validator

from bot.config.section import Section

logger = logging.getLogger(__name__)


def positive_or_default(value: object, info: ValidationInfo) -> object:
    """Review thresholds and the budget: 0, negative or non-numbers would make every turn (or
    none) trigger a review, so they fall back to the default with a warning (seed 003)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    assert info.field_name is not None
    default = MemoryConfig.model_fields[info.field_name].default
    logger.warning(
        "memory.%s = %r is not a positive number; using %s", info.field_name, value, default
    )
    return default


class MemoryConfig(Section):
    auto_memory: bool = True
    review_turns: int = 3
    review_chars: int = 2000
    review_model: str | None = None
    context_budget: int = 20000
    budget_notice: bool = True
    history_chars: int = Field(12000, ge=500)
    session_idle_hours: float = Field(6, gt=0)
    session_max_hours: float = Field(24, gt=0)
    carry_turns: int = Field(6, ge=0, le=50)
    idle_review_minutes: int = Field(30, ge=1)
    nightly: str = Field("04:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    changelog_keep: int = Field(500, ge=10)

    _positive = field_validator("review_turns", "review_chars", "context_budget", mode="before")(
        positive_or_default
    )

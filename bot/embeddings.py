"""The OpenAI-compatible embeddings client behind semantic recall (``[embeddings]``).

Any endpoint that serves ``/v1/embeddings`` works: OpenAI ``text-embedding-3-small``, Ollama
``bge-m3`` or ``nomic-embed-text``, a vLLM or TEI server. Background batches use
``embeddings.timeout`` and the SDK's retries; a search's query gets ``query_timeout`` and no
retry, because a turn waits for it. The SDK's exceptions and odd answers become
:class:`EmbeddingsUnavailable` (try again later) or :class:`EmbeddingsRejected` (this input will
never do), so nothing past this module knows the SDK. Vectors come back unit-length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import openai
from pydantic import SecretStr

from bot.config import EmbeddingsConfig, LLMConfig

if TYPE_CHECKING:  # numpy is loaded only when [embeddings] is set: ~20 MB a gateway without
    import numpy as np  # semantic recall never needs

NO_KEY = "not-set"
MAX_INPUT_CHARS = 8000
"""Text sent per message, at most: a long message's start says what it is about, and every
endpoint's input limit (8k tokens for OpenAI's, 512 for many local models, which truncate
themselves) is then kept or left to the server."""


class EmbeddingsError(Exception):
    """The embeddings endpoint gave no vectors."""


class EmbeddingsUnavailable(EmbeddingsError):
    """Down, slow, rate limited, misconfigured or answering nonsense: try again later."""


class EmbeddingsRejected(EmbeddingsError):
    """The endpoint refused this input itself (a 400-class answer): retrying will not help."""


def api_key(config: EmbeddingsConfig, llm: LLMConfig) -> SecretStr | None:
    """``embeddings.api_key``; unset, ``llm.api_key`` when both are the same endpoint (the same
    provider: the same account)."""
    if config.api_key is None and (config.base_url or "").rstrip("/") == llm.base_url.rstrip("/"):
        return llm.api_key
    return config.api_key


class EmbeddingsClient:
    """Embeds texts with the configured model."""

    def __init__(self, config: EmbeddingsConfig, llm: LLMConfig) -> None:
        if not config.base_url or not config.model:
            raise ValueError("embeddings are off: [embeddings] base_url and model are not set")
        self.model = config.model
        self.query_timeout = config.query_timeout
        key = api_key(config, llm)
        self._client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=key.get_secret_value() if key else NO_KEY,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )
        self._query_client = self._client.with_options(timeout=config.query_timeout, max_retries=0)

    async def close(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One vector per text, in order (a background batch)."""
        return await self._embed(self._client, texts)

    async def embed_query(self, text: str) -> np.ndarray:
        """A search query's vector: one attempt, ``query_timeout`` seconds at most."""
        return (await self._embed(self._query_client, [text]))[0]

    async def _embed(self, client: openai.AsyncOpenAI, texts: Sequence[str]) -> list[np.ndarray]:
        inputs = [text[:MAX_INPUT_CHARS] for text in texts]
        try:
            response = await client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float"
            )
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            raise EmbeddingsRejected(f"the embeddings endpoint refused the input: {exc}") from exc
        except (openai.OpenAIError, ValueError) as exc:  # ValueError: a body that is not JSON
            raise EmbeddingsUnavailable(f"the embeddings endpoint failed: {exc}") from exc
        data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
        if len(data) != len(inputs):
            raise EmbeddingsUnavailable(
                f"the embeddings endpoint answered {len(data)} vectors for {len(inputs)} texts"
            )
        from bot.vectors import BadVector, unit

        try:
            vectors = [unit(item.embedding) for item in data]
        except (BadVector, TypeError) as exc:
            raise EmbeddingsUnavailable(f"the embeddings endpoint answered badly: {exc}") from exc
        if len({v.size for v in vectors}) > 1:
            raise EmbeddingsUnavailable("the embeddings endpoint answered vectors of mixed sizes")
        return vectors

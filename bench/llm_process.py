"""A fake OpenAI-compatible endpoint in a process of its own, for the benchmarks.

A real LLM endpoint runs elsewhere, so its work must not count against the gateway: the fake
answers from a separate process (the other core on a 2-core machine) on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
SERVER = """
import asyncio, sys
sys.path.insert(0, {root!r})
from tests.fakes.fake_llm import FakeLLM, Reply

async def main():
    async with FakeLLM(lambda _r: Reply(text={text!r}, delay_seconds={delay})) as llm:
        print(llm.base_url, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def llm_process(delay: float = 0.0, text: str = "ok") -> AsyncIterator[str]:
    """Start the fake LLM in a subprocess; yields its base URL; kills it afterwards."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SERVER.format(root=ROOT, delay=delay, text=text),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        yield (await process.stdout.readline()).decode().strip()
    finally:
        process.kill()
        await process.wait()

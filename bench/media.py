"""Voice and photo turns against the same turn as text, in one run, with zero-latency fakes.

The whole gateway runs on the real python-telegram-bot and openai clients against the fake Bot
API (in this process, as in the throughput benchmarks) and the fake OpenAI-compatible server
(chat, transcriptions, speech) in a process of its own (``bench/llm_process.py``), as a real
endpoint would be. Each figure is the time from the update being queued at the fake Bot API
to the reply arriving there: with zero-latency fakes that is gateway (and fake Bot API) work.

* text turn: a short text in, a 500-character text reply out;
* voice turn: a 1-minute OGG/Opus voice note in (downloaded, transcribed), the same
  500-character reply out as a voice bubble (spoken, sent with sendVoice);
* peak RSS growth over the voice turns, and whether any audio was kept after them;
* photo turn: the bytes of the chat request for a 12-megapixel photo at the default downscale.

    .venv/bin/python bench/media.py [--turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402

from adapters.telegram_channel import TelegramChannel  # noqa: E402
from bench.llm_process import llm_process  # noqa: E402
from bot.app import App, build_app  # noqa: E402
from partners.catalog import PartnerCatalog  # noqa: E402
from tests.conftest import make_config  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from tests.fakes.fake_telegram import TOKEN, FakeTelegram  # noqa: E402
from tests.fakes.ogg_opus import make_ogg_opus  # noqa: E402

REPLY = ("Listening to you talk about the walk made my day. " * 10)[:500]
TEXT_CHAT = 200_001
VOICE_CHAT = 200_002
PHOTO_CHAT = 200_003


def reply_to_everything(request: dict) -> Reply:
    del request
    return Reply(text=REPLY)


async def one_turn(fake: FakeTelegram, chat_id: int, method: str, **message: object) -> float:
    before = len(fake.sent(method, chat_id))
    started = time.perf_counter()
    fake.send_user_message(chat_id=chat_id, **message)
    await fake.wait_for_sent(chat_id=chat_id, method=method, count=before + 1, timeout=60)
    return time.perf_counter() - started


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def photo_jpeg() -> bytes:
    """A 4000 x 3000 photo-like JPEG (colour gradients under sensor-like noise), a few MB
    as a phone sends one."""
    size = (4000, 3000)
    channels = [
        Image.blend(Image.linear_gradient("L").resize(size).rotate(angle), noise, 0.35)
        for angle, noise in ((0, Image.effect_noise(size, 40)), (90, Image.effect_noise(size, 40)),
                             (180, Image.effect_noise(size, 40)))
    ]  # fmt: skip
    out = io.BytesIO()
    Image.merge("RGB", channels).save(out, "JPEG", quality=92)
    return out.getvalue()


async def start(fake: FakeTelegram, llm_url: str, data_dir: Path) -> App:
    catalog = PartnerCatalog(data_dir / "partners")
    catalog.ensure_example()
    with (data_dir / "partners" / "example" / "preset.yml").open("a") as preset:
        preset.write("vision: true\n")
    config = make_config(
        data_dir,
        llm_url,
        telegram={"token": TOKEN, "base_url": fake.base_url, "poll_timeout_seconds": 1},
        speech={"stt_model": "whisper-1", "tts_model": "tts-1"},
    )
    app = await build_app(config, {"telegram": TelegramChannel(config.telegram)})
    await app.start()
    return app


async def timed_turns(turns: int) -> tuple[list[float], list[float], float, bool]:
    """Text and voice turns, alternated so that the machine's load weighs on both alike."""
    voice_note = make_ogg_opus(60)
    async with FakeTelegram() as fake, llm_process(text=REPLY) as llm_url:
        with tempfile.TemporaryDirectory() as tmp:
            data_dir = Path(tmp) / "data"
            app = await start(fake, llm_url, data_dir)
            try:
                # warm up both paths (sessions, connections, imports)
                await one_turn(fake, TEXT_CHAT, "sendMessage", text="hello")
                await one_turn(fake, VOICE_CHAT, "sendVoice", voice=True, media=voice_note)
                text_times, voice_times = [], []
                rss_before = peak_rss_mib()
                for _ in range(turns):
                    text_times.append(
                        await one_turn(fake, TEXT_CHAT, "sendMessage", text="how are you?")
                    )
                    voice_times.append(
                        await one_turn(
                            fake, VOICE_CHAT, "sendVoice", voice=True, media=voice_note, duration=60
                        )
                    )
                rss_growth = peak_rss_mib() - rss_before
                await app.dispatcher.idle()
                kept = data_dir / "partners" / "example" / "audio"
                database = (data_dir / "gateway.db").read_bytes()
                audio_kept = kept.exists() or voice_note[100:400] in database
            finally:
                await app.stop()
    return text_times, voice_times, rss_growth, audio_kept


async def photo_request_bytes(photo: bytes) -> int:
    """The size of the chat request that carries ``photo`` to a vision partner."""
    async with FakeTelegram() as fake, FakeLLM(reply_to_everything) as llm:
        with tempfile.TemporaryDirectory() as tmp:
            app = await start(fake, llm.base_url, Path(tmp) / "data")
            try:
                await one_turn(fake, PHOTO_CHAT, "sendMessage", photo=True, media=photo)
            finally:
                await app.stop()
        return len(json.dumps(llm.requests[-1]).encode())


async def run(turns: int) -> None:
    text_times, voice_times, rss_growth, audio_kept = await timed_turns(turns)
    photo = photo_jpeg()
    request_bytes = await photo_request_bytes(photo)
    text_ms = statistics.median(text_times) * 1000
    voice_ms = statistics.median(voice_times) * 1000
    print(f"turns per kind: {turns}")
    print(f"text turn, gateway-added p50: {text_ms:.1f} ms")
    print(
        f"voice turn (1-min note in, 500-char voice reply out) p50: {voice_ms:.1f} ms "
        f"= {voice_ms / text_ms:.2f}x the text turn (goal <= 2x)"
    )
    print(f"peak RSS growth over the turns: {rss_growth:.1f} MiB (goal <= 20 MiB)")
    print(f"audio kept after the turns: {'yes' if audio_kept else 'no'} (goal: no)")
    print(
        f"photo turn request: {request_bytes:,} bytes for a {len(photo):,}-byte 4000x3000 "
        "photo at the default downscale (1024 px, 1 MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args.turns))


if __name__ == "__main__":
    main()

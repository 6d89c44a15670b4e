"""Photos are bounded before they are decoded (bot/turn/images.py): a file whose header claims too
many pixels is refused before a pixel is decoded, a large JPEG is decoded at a reduced scale,
one image is decoded at a time, and whatever Pillow cannot or will not read is refused as
NotAnImage, never another error; in a turn, a refused photo is named to the model as one that
could not be opened, and the message is answered (end to end on Telegram).

Memory is measured in a fresh child process, as the rise of its peak resident size (Linux:
VmHWM, reset through /proc/self/clear_refs): Pillow allocates pixels outside Python's
allocator, where tracemalloc sees nothing."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, PngImagePlugin

from bot.turn.failures import TURN_FAILED
from bot.turn.images import MAX_IMAGE_PIXELS, ImageTooLarge, NotAnImage, downscale, image_url
from bot.turn.media import UNOPENED_PHOTO_NOTE
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.image_support import (
    encoded,
    gif_with_huge_second_frame,
    huge_png,
    huge_screen_gif,
    text_bomb_png,
)
from tests.telegram_harness import (
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)
from tests.test_telegram_media import ALICE, preset_lines

ROOT = Path(__file__).resolve().parent.parent
MAX_SIDE = 1024
MAX_BYTES = 1_000_000
MEGABYTE_KB = 1024
CHILD_TIMEOUT_SECONDS = 120
FIXED_MMAP_THRESHOLD = {"MALLOC_MMAP_THRESHOLD_": "131072"}
"""glibc then maps every large block on its own and unmaps it when freed (by default it
raises the threshold and keeps freed blocks resident, per thread): the peak counts only
what was alive at once."""

MEASURE = """
import json, re, sys, threading
from bot.turn.images import NotAnImage, downscale

def resident_kb(field):
    status = open("/proc/self/status").read()
    return int(re.search(field + r":\\s+(\\d+) kB", status).group(1))

images = [open(path, "rb").read() for path in sys.argv[1:]]
outcomes = []
start = threading.Barrier(len(images))

def run(data):
    start.wait()
    try:
        jpeg = downscale(data, 1024, 1_000_000)
        outcomes.append(f"jpeg of {len(jpeg)} bytes")
    except NotAnImage as exc:
        outcomes.append(f"refused: {exc}")

threads = [threading.Thread(target=run, args=(data,)) for data in images]
with open("/proc/self/clear_refs", "w") as clear:
    clear.write("5")  # the peak (VmHWM) starts again from what is resident now
before = resident_kb("VmRSS")
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"growth_kb": resident_kb("VmHWM") - before, "outcomes": outcomes}))
"""
"""Downscales the files named on its command line, all at once (one thread each), and prints
how far the process's peak resident size rose above what it held before, in kB, and what
each image came to."""


def peak_growth(tmp_path: Path, *images: bytes) -> tuple[int, list[str]]:
    """(kB the peak resident size grew while ``images`` were downscaled at once, outcomes)."""
    paths = []
    for number, data in enumerate(images):
        path = tmp_path / f"image-{number}"
        path.write_bytes(data)
        paths.append(str(path))
    env = {**os.environ, "PYTHONPATH": str(ROOT), **FIXED_MMAP_THRESHOLD}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=CHILD_TIMEOUT_SECONDS,
        check=True,
    )
    result = json.loads(done.stdout)
    return int(result["growth_kb"]), list(result["outcomes"])


def jpeg_size(data: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(data))
    assert image.format == "JPEG"
    return image.size


# ---- memory ---------------------------------------------------------------------------------


def test_a_png_claiming_169_megapixels_is_refused_before_its_pixels_are_decoded(
    tmp_path: Path,
) -> None:
    bomb = huge_png(13000, 13000)  # ~20 kB; decoded, 169 MB as 1-bit and 507 MB as RGB
    decoded_kb = 13000 * 13000 // 1024
    growth_kb, [outcome] = peak_growth(tmp_path, bomb)
    assert outcome.startswith("refused: ") and "megapixels" in outcome
    assert growth_kb < decoded_kb // 16


def test_a_large_jpeg_is_decoded_at_a_reduced_scale(tmp_path: Path) -> None:
    photo = encoded(Image.new("L", (8000, 6000), 128), "JPEG", quality=50)  # 48 megapixels
    decoded_kb = 8000 * 6000 // 1024
    growth_kb, [outcome] = peak_growth(tmp_path, photo)
    assert outcome.startswith("jpeg of ")
    assert growth_kb < decoded_kb // 2


def test_two_images_decoded_at_once_cost_the_memory_of_one(tmp_path: Path) -> None:
    # PNG cannot be decoded at a reduced scale: each costs its full size while it is decoded
    one_kb, _ = peak_growth(tmp_path, huge_png(6000, 6000, level=1))
    both_kb, outcomes = peak_growth(
        tmp_path, huge_png(6000, 6000, level=1), huge_png(6000, 6001, level=1)
    )
    assert [o.startswith("jpeg of ") for o in outcomes] == [True, True]
    assert one_kb > 6000 * 6000 // 1024  # the measure sees a whole decode
    assert both_kb < one_kb * 3 // 2


async def test_photos_waiting_their_turn_leave_the_shared_thread_pool_free() -> None:
    photo = huge_png(3000, 3000)
    done: list[int] = []

    async def one(number: int) -> None:
        await image_url(photo, MAX_SIDE, MAX_BYTES)
        done.append(number)

    photos = [asyncio.create_task(one(n)) for n in range(12)]
    await asyncio.sleep(0)  # every photo has asked for its turn
    await asyncio.to_thread(len, "other work")  # a file write, say
    finished_first = len(done)
    await asyncio.gather(*photos)
    assert finished_first <= 1


# ---- refusals --------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow's, at open
def test_an_image_over_the_pixel_ceiling_is_refused_naming_its_size() -> None:
    with pytest.raises(ImageTooLarge, match="10000×6000 pixels") as refused:
        downscale(huge_png(10000, 6000), MAX_SIDE, MAX_BYTES)
    assert f"{MAX_IMAGE_PIXELS // 1_000_000} megapixels" in str(refused.value)


def test_a_decompression_bomb_far_over_the_ceiling_is_refused() -> None:
    with pytest.raises(ImageTooLarge, match="megapixels"):
        downscale(huge_png(30000, 30000, level=1), MAX_SIDE, MAX_BYTES)


def test_a_gif_whose_header_claims_a_huge_screen_is_refused() -> None:
    with pytest.raises(ImageTooLarge, match="megapixels"):
        downscale(huge_screen_gif(), MAX_SIDE, MAX_BYTES)


@pytest.mark.parametrize("before_idat", [True, False], ids=["before-pixels", "after-pixels"])
def test_a_png_text_chunk_over_pillows_limit_is_refused(before_idat: bool) -> None:
    with pytest.raises(NotAnImage, match="MAX_TEXT_CHUNK"):
        downscale(text_bomb_png(before_idat=before_idat), MAX_SIDE, MAX_BYTES)


def test_a_format_other_than_the_photo_formats_is_refused() -> None:
    tiff = encoded(Image.new("RGB", (40, 30), (10, 20, 30)), "TIFF")
    with pytest.raises(NotAnImage):
        downscale(tiff, MAX_SIDE, MAX_BYTES)


def test_a_truncated_png_is_refused() -> None:
    whole = encoded(Image.effect_noise((200, 200), 50), "PNG")
    with pytest.raises(NotAnImage):
        downscale(whole[: len(whole) // 2], MAX_SIDE, MAX_BYTES)


# ---- what is kept ------------------------------------------------------------------------------


def test_only_the_first_frame_of_an_animation_is_decoded() -> None:
    jpeg = downscale(gif_with_huge_second_frame(), MAX_SIDE, MAX_BYTES)
    assert jpeg_size(jpeg) == (1, 1)


def test_a_photo_is_turned_upright_by_its_exif_orientation() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # stored on its side: turn 90° clockwise to view
    sideways = encoded(Image.new("RGB", (4000, 2000), (90, 90, 200)), "JPEG", exif=exif)
    assert jpeg_size(downscale(sideways, MAX_SIDE, MAX_BYTES)) == (512, 1024)


def test_a_palette_image_is_downscaled_to_the_side() -> None:
    gif = encoded(Image.new("RGB", (3000, 1500), (200, 30, 30)).convert("P"), "GIF")
    assert jpeg_size(downscale(gif, MAX_SIDE, MAX_BYTES)) == (1024, 512)


# ---- anything at all ---------------------------------------------------------------------------


def _seeds() -> list[bytes]:
    picture = Image.effect_noise((48, 32), 60).convert("RGB")
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "x" * 200, zip=True)
    exif = Image.Exif()
    exif[0x0112] = 3
    frames = [picture, picture.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    return [
        encoded(picture, "PNG", pnginfo=info),
        encoded(picture, "PNG", save_all=True, append_images=frames[1:]),
        encoded(picture, "JPEG", exif=exif),
        encoded(picture, "JPEG", progressive=True),
        encoded(picture, "GIF", save_all=True, append_images=frames[1:]),
        encoded(picture, "WEBP", save_all=True, append_images=frames[1:]),
        encoded(picture, "BMP"),
    ]


SEEDS = _seeds()


@st.composite
def damaged_images(draw: st.DrawFn) -> bytes:
    """A valid small image with a few bytes changed, cut out, or cut short."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        if len(data) < 2:
            break
        at = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["change", "cut out", "cut short"]))
        if how == "change":
            data[at] = draw(st.integers(0, 255))
        elif how == "cut out":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            del data[max(at, 1) :]
    return bytes(data)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.filterwarnings("ignore:Corrupt EXIF data:UserWarning")  # Pillow reads on
@settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(damaged_images())
def test_a_damaged_image_is_downscaled_or_refused_as_not_an_image(data: bytes) -> None:
    try:
        jpeg = downscale(data, MAX_SIDE, MAX_BYTES)
    except NotAnImage:
        return
    assert max(jpeg_size(jpeg)) <= MAX_SIDE and len(jpeg) <= MAX_BYTES


# ---- end to end: a refused photo in a turn -------------------------------------------------


async def test_a_photo_bomb_sent_as_a_file_is_named_unopened_and_its_caption_answered(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true")
    await gateways.start()
    caption = "what do you think of my drawing?"
    update = fake.message_update(chat_id=ALICE, document=True, caption=caption)
    document = update["message"]["document"]
    fake.add_file(document["file_id"], huge_screen_gif(), "documents/drawing.gif")
    document.update(mime_type="image/gif", file_name="drawing.gif")
    fake_llm.script(Reply(text="I couldn't open it, but tell me about your drawing!"))
    fake.push_update(update)
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert answer.text == "I couldn't open it, but tell me about your drawing!"
    [request] = fake_llm.requests
    asked = fake_llm.last_user_text(request)
    assert UNOPENED_PHOTO_NOTE in asked and caption in asked
    assert fake_llm.image_parts == []


async def test_a_photo_nobody_could_open_is_not_described_and_is_named_unopened(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(llm={"vision_model": "vision-model"})
    fake_llm.script(Reply(text="Sorry, that picture would not open for me."))
    fake.send_user_message(chat_id=ALICE, photo=True, media=text_bomb_png(before_idat=False))
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert answer.text == "Sorry, that picture would not open for me."
    [request] = fake_llm.requests  # no description was asked for
    assert UNOPENED_PHOTO_NOTE in fake_llm.last_user_text(request)
    await settled(fake, gateway)
    assert TURN_FAILED not in [call.text for call in fake.sent("sendMessage", ALICE)]


def test_pillow_loads_with_the_first_photo_not_with_the_gateway() -> None:
    """Most gateways never see a photo: building one leaves Pillow (2 MB resident) unloaded."""
    code = "import sys, bot.app, adapters.telegram_channel; print('PIL' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.stdout.strip() == "False", loaded.stderr

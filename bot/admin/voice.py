"""Owner commands about kept voice notes: ``/admin voice forget [partner]`` deletes the audio
``speech.keep_audio`` kept (``bot/turn/media.py``: ``audio/`` in a partner's directory, or in the
data directory for the owner's assistant). The transcripts stay: they are the messages' text,
and ``/forget history`` is how a user removes those. Audited like every ``/admin`` action."""

from __future__ import annotations

import asyncio

from bot.commands.types import CommandContext, CommandReply
from bot.text.literal import literal_line
from bot.turn.media import audio_dir, delete_kept_audio


async def voice_forget(ctx: CommandContext) -> CommandReply:
    if ctx.args:
        partner = ctx.catalog.require(ctx.args[0])
        folders = [audio_dir(partner.dir)]
        whose = f" of {literal_line(partner.name)}"
    else:
        partners = ctx.catalog.all()
        folders = [audio_dir(p.dir) for p in partners] + [audio_dir(ctx.config.data_dir)]
        whose = ""
    files = size = 0
    for folder in folders:
        deleted, freed = await asyncio.to_thread(delete_kept_audio, folder)
        files, size = files + deleted, size + freed
    notes = "voice note" if files == 1 else "voice notes"
    return CommandReply(f"Deleted {files} kept {notes} ({size:,} bytes){whose}.")

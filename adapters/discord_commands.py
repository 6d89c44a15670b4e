"""The gateway's commands as Discord application (slash) commands.

Every user command of :data:`bot.commands.table.COMMANDS` becomes a slash command of the same name;
one that takes arguments gets an optional ``args`` option (its usage as the description), and
``/partner`` offers the public partners as choices of its ``id`` option. The owner's commands are
one ``/admin`` whose ``command`` option is the rest of the line (``approve ABC123``). It is
registered with no default member permissions, so in servers only administrators see it; in DMs
Discord cannot hide a command from one user, so the gateway's refusal (the unknown-command answer)
is the guarantee (docs/architecture.md "Commands"). In a server channel the gateway answers a
command the sender may not run with silence, as it does typed ones there: the deferral (which
Discord requires within 3 s) is then removed, the same end as in an unbound channel.

:class:`SlashCommands` answers an invocation: it defers it at once (Discord allows 3 s), hands
the command line it stands for (``/partner sol``) to the gateway as an ordinary inbound message
from that user in that chat, and sends the gateway's answer back as the interaction's
follow-up. A pressed button (:meth:`SlashCommands.press`) is handed over the same way, its
``custom_id`` the command line.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import discord
from discord import app_commands

from adapters.base import Receiver
from adapters.chat_locks import ChatLocks
from adapters.discord_events import interaction_event
from bot.commands.table import COMMANDS, Command
from bot.events import ChatRef, Outbound

logger = logging.getLogger(__name__)

MAX_CHOICES = 25
"""Discord's limit for the choices of one option."""
MAX_DESCRIPTION_CHARS = 100

RunCommand = Callable[[discord.Interaction, str], Awaitable[None]]


def build_tree(
    client: discord.Client, partners: Sequence[tuple[str, str]], run: RunCommand
) -> app_commands.CommandTree[discord.Client]:
    """A command tree for ``client`` with every command the gateway serves."""
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
    for command in COMMANDS.values():
        if command.owner_only:
            continue
        if command.name == "partner":
            tree.add_command(_partner_command(partners, run))
        elif command.usage:
            tree.add_command(_command_with_args(command, run))
        else:
            tree.add_command(_plain_command(command.name, command.help, run))
    tree.add_command(_admin_command(run))
    return tree


def _description(text: str) -> str:
    return (text or "no description")[:MAX_DESCRIPTION_CHARS]


def _plain_command(name: str, help_text: str, run: RunCommand) -> app_commands.Command:
    async def callback(interaction: discord.Interaction) -> None:
        await run(interaction, f"/{name}")

    return app_commands.Command(name=name, description=_description(help_text), callback=callback)


def _command_with_args(command: Command, run: RunCommand) -> app_commands.Command:
    name = command.name

    async def callback(interaction: discord.Interaction, args: str | None = None) -> None:
        await run(interaction, f"/{name} {args}" if args else f"/{name}")

    callback = app_commands.describe(args=_description(command.usage))(callback)
    return app_commands.Command(
        name=name, description=_description(command.help), callback=callback
    )


def _partner_command(partners: Sequence[tuple[str, str]], run: RunCommand) -> app_commands.Command:
    @app_commands.rename(partner="id")
    @app_commands.describe(partner="the partner to talk with (leave out to see them all)")
    async def callback(interaction: discord.Interaction, partner: str | None = None) -> None:
        await run(interaction, f"/partner {partner}" if partner else "/partner")

    if partners:
        # Choices are fixed when the commands are synced (once, at start): a partner added
        # later is offered after the next restart (and by /partner without an id meanwhile).
        options = [
            app_commands.Choice(name=name[:MAX_DESCRIPTION_CHARS], value=partner_id)
            for partner_id, name in partners[:MAX_CHOICES]
        ]
        callback = app_commands.choices(partner=options)(callback)
    return app_commands.Command(
        name="partner", description=_description(COMMANDS["partner"].help), callback=callback
    )


def _admin_command(run: RunCommand) -> app_commands.Command:
    @app_commands.default_permissions()
    @app_commands.describe(command="the owner command and its arguments, e.g. approve ABC123")
    async def callback(interaction: discord.Interaction, command: str | None = None) -> None:
        await run(interaction, f"/admin {command}" if command else "/admin")

    return app_commands.Command(
        name="admin", description=_description(COMMANDS["admin"].help), callback=callback
    )


@dataclass
class PendingInteraction:
    """A slash command being answered: the gateway's reply to it goes out as its follow-up."""

    interaction: discord.Interaction
    ephemeral: bool
    answered: bool = False

    @property
    def message_id(self) -> str:
        return f"i{self.interaction.id}"


class SlashCommands:
    """The slash commands and button presses being answered, at most one per chat at a time
    (the chat's lock)."""

    def __init__(self, locks: ChatLocks) -> None:
        self._locks = locks
        self._pending: dict[str, PendingInteraction] = {}

    async def run(self, interaction: discord.Interaction, text: str, receiver: Receiver) -> None:
        """One slash command (the per-interaction edge): defer, hand the command line to the
        gateway, and make sure the interaction ends answered."""
        ephemeral = text.startswith("/admin")  # owner business stays between owner and bot
        try:
            await interaction.response.defer(thinking=True, ephemeral=ephemeral)
        except discord.HTTPException as exc:
            logger.warning("discord: interaction %s not acknowledged: %s", interaction.id, exc)
            return
        pending = PendingInteraction(interaction, ephemeral)
        await self._hand_over(pending, text, receiver)
        if not pending.answered:
            # Nothing to say here (an unbound channel, a blocked user, /admin from anyone but
            # the owner in a server): end the "thinking…" quietly rather than leave it spinning.
            with contextlib.suppress(discord.HTTPException):
                await interaction.delete_original_response()

    async def press(self, interaction: discord.Interaction, receiver: Receiver) -> None:
        """A pressed button (the per-interaction edge; ``adapters/discord_buttons.py``): its
        command handed to the gateway as typed by the presser, once the press is acknowledged
        (a deferred update: the message and its buttons stay as they are). What the gateway
        says back to it, if anything, only the presser sees."""
        data = interaction.data
        command = data.get("custom_id") if data is not None else None
        if not isinstance(command, str) or not command:
            return
        try:
            await interaction.response.defer()
        except discord.HTTPException as exc:
            logger.warning("discord: button press %s not acknowledged: %s", interaction.id, exc)
            return
        await self._hand_over(PendingInteraction(interaction, ephemeral=True), command, receiver)

    async def _hand_over(self, pending: PendingInteraction, text: str, receiver: Receiver) -> None:
        """``text`` to the gateway as the interaction's user's message, its answer to go back
        as the interaction's follow-up."""
        inbound = interaction_event(pending.interaction, text)
        if inbound is None:
            return
        async with self._locks.hold(inbound.chat.key):
            self._pending[inbound.chat.key] = pending
            try:
                await receiver.receive(inbound)
            except Exception:
                logger.exception("discord: interaction %r not handled", text)
            finally:
                del self._pending[inbound.chat.key]

    def pending(self, chat: ChatRef) -> PendingInteraction | None:
        """The interaction being answered in ``chat``, if any (a file answers it whole)."""
        pending = self._pending.get(chat.key)
        return None if pending is None or pending.interaction.is_expired() else pending

    def answering(self, message: Outbound) -> PendingInteraction | None:
        """The interaction ``message`` answers, if any: the first chunk of the answer names
        the interaction, the chunks after it come without a reply-to."""
        pending = self.pending(message.chat)
        if pending is None:
            return None
        reply_to = message.reply_to_message_id
        if reply_to == pending.message_id or (reply_to is None and pending.answered):
            return pending
        return None

"""Every slash command, declared once with its permission, usage and help, served by every
channel.

A leaf: declarations only, importing nothing of ours, so a channel registering the slash
commands pulls in no handler, no partner and no store. The handlers that answer these names
live in ``bot/commands/handlers.py``, beside the gateway that dispatches them.

User commands are open to everyone (the owner too). Owner commands all live under ``/admin``
so none clashes with a user command of the same word. A non-owner who sends ``/admin`` gets
exactly the answer an unknown command gets, and ``/help`` never lists it to them.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN = "Unknown command. Send /help to see what I understand."


@dataclass(frozen=True)
class Command:
    """One command as the channels and ``/help`` show it; what answers it is looked up by
    ``name`` among the handlers."""

    name: str
    usage: str
    help: str
    owner_only: bool = False
    dm_only: bool = False


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("start", "", "what this bot is"),
        Command("help", "", "this list"),
        Command("partner", "[id]", "choose who you talk with", dm_only=True),
        Command("new", "", "start a new conversation"),
        Command("memory", "", "what your partner remembers about you", dm_only=True),
        Command("forget", "<id>|all|history", "make it forget", dm_only=True),
        Command("export", "", "a copy of everything kept about you", dm_only=True),
        Command("checkins", "on|off", "let your partner write first", dm_only=True),
        Command("timezone", "<Area/City>", "your time zone", dm_only=True),
        Command("voice", "on|off|auto", "answer by voice message", dm_only=True),
        Command("admin", "<command>", "owner commands", owner_only=True),
    )
}


def transparency_note(owner_can_read: bool = True) -> str:
    lines = [
        "Good to know: this companion runs on its owner's own server.",
        "The owner can read conversations and what the partner remembers about you."
        if owner_can_read
        else "",
        "Send /memory to see what it remembers about you and /forget to delete it.",
    ]
    return "\n".join(line for line in lines if line)


def help_text(is_owner: bool) -> str:
    lines = [
        f"/{c.name} {c.usage}".rstrip() + f" — {c.help}"
        for c in COMMANDS.values()
        if not c.owner_only
    ]
    if is_owner:  # the note is what users should know about the owner
        lines.append("/admin — owner commands (send /admin for the list)")
        return "\n".join(lines)
    return "\n".join(lines) + "\n\n" + transparency_note()


def is_user_command(name: str) -> bool:
    """Whether ``name`` is a command anyone may use. Typed in a group without naming the bot,
    only these are meant for it: an unknown word, or ``/admin``, is chatter kept as context
    (perhaps another bot's command), so a non-owner's /admin meets the same silence as any
    unknown command and learns nothing. The owner's commands run wherever the owner types
    them (the gateway checks that)."""
    command = COMMANDS.get(name.lower())
    return command is not None and not command.owner_only


def parse_command(text: str, bot_username: str | None = None) -> tuple[str, list[str]] | None:
    """``/name@bot arg1 arg2`` -> (name, args); None if the text is not a command for us."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, *args = text[1:].split()
    name, _, target = head.partition("@")
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name.lower(), args

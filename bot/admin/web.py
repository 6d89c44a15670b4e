"""``/admin web``: a one-time link to the owner's web page, and ``/admin web logout``, which
ends every session (a phone left logged in, a link sent by mistake)."""

from __future__ import annotations

from bot.admin.args import AdminError, services
from bot.commands.types import CommandContext, CommandReply
from bot.web.auth import LOGIN_TTL_SECONDS

WEB_OFF = (
    "The web page is off. Set enabled = true under [web] in config.toml (docs/web.md) and "
    "restart the gateway."
)
LOGOUT = "logout"


async def admin_web(ctx: CommandContext) -> CommandReply:
    web = services(ctx).web
    if web is None:
        raise AdminError(WEB_OFF)
    if ctx.args:
        if ctx.args[0].lower() != LOGOUT:
            raise AdminError("Usage: /admin web (a login link) or /admin web logout")
        ended = await web.logout_all()
        return CommandReply(f"Logged out everywhere: {ended} session(s) ended, unused links void.")
    link = await web.login_link()
    minutes = int(LOGIN_TTL_SECONDS // 60)
    return CommandReply(
        f"Your web page: {link}\nThe link works once, within {minutes} minutes, and only "
        "for you: do not forward it. /admin web logout ends every session."
    )

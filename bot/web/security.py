"""What every request and response of the web page goes through: headers that keep the page
to itself (a strict Content-Security-Policy: no script, no inline style, nothing from another
origin), the session check, the CSRF check, the answer to an unexpected error, and the rule
for where a redirect may go.

The headers are added as each answer is prepared (:func:`add_security_headers`, aiohttp's
``on_response_prepare``), so pages, redirects, static files and every error — 400, 403, 404,
405, 500 — carry them without a handler having to remember.

Only the login link's own address and the stylesheet are open without a session; everything
else answers a stranger with the same page that says how the owner gets in.
"""

from __future__ import annotations

import html
import logging
import unicodedata
from collections.abc import Awaitable, Callable
from urllib.parse import unquote, urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from bot.web.auth import COOKIE_NAME, WebAuth, WebSession

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # the login link carries its token: no other site may learn a page's address
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
OPEN_PREFIXES = ("/login/", "/static/")
SAFE_METHODS = ("GET", "HEAD")
NOT_LOGGED_IN = (
    "<!doctype html><title>Log in</title><p>This page is the gateway owner's. "
    "To open it, send <code>/admin web</code> in your direct chat with the bot and use the "
    "one-time link it answers with.</p>"
)
BAD_CSRF = (
    "<!doctype html><title>Refused</title><p>The form was missing its security token or it "
    "did not match your session, so nothing was changed. Reload the page and try again.</p>"
)
BROKEN = (
    "Something went wrong on the gateway's side and an error was logged. Try again, or look "
    "at the gateway's log for what failed."
)
ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body><main><h1>{title}</h1><p class="note">{message}</p>
<p><a href="/">Back to the status page</a></p></main></body></html>"""
SESSION = web.RequestKey("web_session", WebSession)
"""Where a logged-in request carries its :class:`WebSession`."""
HOME = "/"


def error_page(title: str, message: str) -> str:
    return ERROR_PAGE.format(title=html.escape(title), message=html.escape(message))


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer's headers, set as it is prepared; a redirect off this site, which no
    handler should ever make, goes home instead."""
    response.headers.update(SECURITY_HEADERS)
    location = response.headers.get("Location")
    if location is not None and site_path(location) is None:
        logger.error("web: %s %s redirected off the site; sent home", request.method, request.path)
        response.headers["Location"] = HOME


@web.middleware
async def answer_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The edge of one web request: an unexpected error is logged whole and answered with a
    page that tells nothing of it."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        logger.exception("web: %s %s failed", request.method, request.path)
        raise web.HTTPInternalServerError(
            text=error_page("Something went wrong", BROKEN), content_type="text/html"
        ) from None


def site_path(target: str) -> str | None:
    """``target`` if it is a path on this site, else None.

    Decided by parsing, not by prefix: browsers drop tabs and newlines and read ``\\`` as
    ``/``, so ``/<TAB>/host`` or ``/\\host`` would leave the site. Any control, format or
    space character and any backslash is refused, in the value and in its once-decoded form;
    what remains must have no scheme and no host, and start with one ``/``."""
    for form in (target, unquote(target)):
        if any(ch == "\\" or unicodedata.category(ch)[0] in "CZ" for ch in form):
            return None
        parts = urlsplit(form)
        if parts.scheme or parts.netloc or not form.startswith("/") or form.startswith("//"):
            return None
    return target


def require_owner(auth: WebAuth) -> Middleware:
    """The session check for every page, and the CSRF check for every change."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(OPEN_PREFIXES):
            return await handler(request)
        session = await auth.session(request.cookies.get(COOKIE_NAME))
        if session is None:
            raise web.HTTPForbidden(text=NOT_LOGGED_IN, content_type="text/html")
        if request.method not in SAFE_METHODS and not await _csrf_ok(request, session):
            raise web.HTTPForbidden(text=BAD_CSRF, content_type="text/html")
        request[SESSION] = session
        return await handler(request)

    return check


async def _csrf_ok(request: web.Request, session: WebSession) -> bool:
    form = await request.post()
    given = form.get("csrf")
    return session.csrf_ok(given if isinstance(given, str) else None)


def session_of(request: web.Request) -> WebSession:
    return request[SESSION]

"""What every request and response of the web page goes through: headers that keep the page
to itself (a strict Content-Security-Policy: no script, no inline style, nothing from another
origin), the session check and the CSRF check.

Only the login link's own address and the stylesheet are open without a session; everything
else answers a stranger with the same page that says how the owner gets in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from bot.web.auth import COOKIE_NAME, WebAuth, WebSession

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
SESSION = web.RequestKey("web_session", WebSession)
"""Where a logged-in request carries its :class:`WebSession`."""


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


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

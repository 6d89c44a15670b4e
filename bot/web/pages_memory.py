"""Memory: the owner's shared memory, each partner's own memory and its per-user files, with
entry ids and dates, search, edit, forget and the changelog with undo.

Forgetting, remembering and undoing run ``/admin forget|remember|undo``; an edit goes through
the memory store's ``edit`` (the one partner_memorize uses, changelog first); search is the
``partner_search`` tool itself, over all of the partner's history as the owner may read it.
"""

from __future__ import annotations

import re

from aiohttp import web

from bot.web import query
from bot.web.actions import WEB_ACTOR
from bot.web.pages import WebParts, form
from bot.web.security import site_path
from partners.memory import MemoryFile
from partners.memory_errors import MemoryInputError
from partners.memory_undo import undoable
from partners.persona import Partner
from partners.tools import ToolContext, ToolError, partner_search

USER_FILE = re.compile(r"^[a-z0-9][a-z0-9-]{0,120}$")
CHANGES_SHOWN = 20
SEARCH_LIMIT = 50
ENTRIES_PER_PAGE = 100
"""A file of thousands of entries is shown a page at a time (and can be filtered)."""
USER_FILES_SHOWN = 100
"""A partner who keeps a file per user lists this many of them (and finds any by name)."""


def routes(parts: WebParts) -> list[web.RouteDef]:
    pages = MemoryPages(parts)
    return [
        web.get("/memory", pages.owner),
        web.post("/memory/remember", pages.remember),
        web.post("/memory/forget", pages.forget),
        web.post("/memory/undo", pages.undo),
        web.post("/memory/edit", pages.edit),
        web.get("/memory/{id}", pages.partner_own),
        web.get("/memory/{id}/users/{user}", pages.user_file),
    ]


class MemoryPages:
    def __init__(self, parts: WebParts) -> None:
        self.parts = parts

    async def owner(self, request: web.Request) -> web.Response:
        file = self.parts.actions.admin.owner_file
        title = "Your memory (every partner reads it)"
        return await memory_page(self.parts, request, file, None, title)

    async def partner_own(self, request: web.Request) -> web.Response:
        partner = self.parts.partner(request.match_info["id"])
        file = MemoryFile(partner.dir, "MEMORY.md")
        title = f"{partner.name}'s own memory"
        return await memory_page(self.parts, request, file, partner, title)

    async def user_file(self, request: web.Request) -> web.Response:
        partner = self.parts.partner(request.match_info["id"])
        stem = request.match_info["user"]
        if not USER_FILE.match(stem) or stem not in await _user_files(self.parts, partner):
            raise web.HTTPNotFound(text=f"{partner.name} keeps no file about {stem!r}.")
        file = MemoryFile(partner.dir, f"users/{stem}.md")
        title = f"What {partner.name} keeps about {stem}"
        return await memory_page(self.parts, request, file, partner, title)

    async def remember(self, request: web.Request) -> web.Response:
        data = await form(request)
        answer = await self.parts.actions.run("remember", data.get("text", ""))
        raise self.parts.done(request, answer, "/memory")

    async def forget(self, request: web.Request) -> web.Response:
        """``/admin forget [partner] <entry>``: gone for good, no undo."""
        data = await form(request)
        whose = [data["partner"]] if data.get("partner") else []
        answer = await self.parts.actions.run("forget", *whose, data.get("entry", ""))
        raise self.parts.done(request, answer, _local(data.get("back", "/memory")))

    async def undo(self, request: web.Request) -> web.Response:
        data = await form(request)
        answer = await self.parts.actions.run("undo", data.get("change", ""))
        raise self.parts.done(request, answer, _local(data.get("back", "/memory")))

    async def edit(self, request: web.Request) -> web.Response:
        data = await form(request)
        file = await _file_of(self.parts, data.get("partner", ""), data.get("file", ""))
        answer = await edit_entry(self.parts, file, data.get("entry", ""), data.get("text", ""))
        raise self.parts.done(request, answer, _local(data.get("back", "/memory")))


def _local(path: str) -> str:
    """Where to go back to: the form's ``back`` when it is a path on this site, else the
    owner's memory."""
    return site_path(path) or "/memory"


async def _user_files(parts: WebParts, partner: Partner) -> list[str]:
    names = await parts.actions.admin.memory.documents.names(partner.dir, "users")
    return [n.removeprefix("users/").removesuffix(".md") for n in names if n.endswith(".md")]


async def _user_file_list(
    parts: WebParts, partner: Partner | None, wanted: str
) -> dict[str, object]:
    """The per-user files a memory page links to: those whose name contains ``wanted``, at
    most :data:`USER_FILES_SHOWN`, and how many there are."""
    names = await _user_files(parts, partner) if partner else []
    matching = [name for name in names if wanted.casefold() in name]
    return {
        "users": matching[:USER_FILES_SHOWN],
        "user_total": len(names),
        "user": wanted,
        "max_users": USER_FILES_SHOWN,
    }


async def _file_of(parts: WebParts, partner_id: str, name: str) -> MemoryFile:
    """The memory file an edit form names: the owner's, a partner's MEMORY.md, or one of its
    per-user files — nothing else."""
    if not partner_id:
        return parts.actions.admin.owner_file
    partner = parts.partner(partner_id)
    if name == "MEMORY.md":
        return MemoryFile(partner.dir, name)
    stem = name.removeprefix("users/").removesuffix(".md")
    if (
        name.startswith("users/")
        and USER_FILE.match(stem)
        and stem in await _user_files(parts, partner)
    ):
        return MemoryFile(partner.dir, f"users/{stem}.md")
    raise web.HTTPNotFound(text=f"{name!r} is not a memory file of {partner.name}.")


async def edit_entry(parts: WebParts, file: MemoryFile, entry_id: str, text: str) -> str:
    memory = parts.actions.admin.memory
    try:
        result = await memory.edit(file, entry_id, text, reason="edited by the owner", source="web")
    except MemoryInputError as exc:
        await parts.store.audit(
            WEB_ACTOR, "web memory edit", entry=entry_id, outcome=f"refused: {exc}"
        )
        return f"Not changed: {exc}"
    await parts.store.audit(
        WEB_ACTOR, "web memory edit", file=file.name, entry=entry_id, change=result.change_id
    )
    if result.duplicate:
        return f"Another entry ({result.entry_id}) says that already; nothing changed."
    return f"Changed {entry_id} (change {result.change_id}; undo it below)."


async def memory_page(
    parts: WebParts, request: web.Request, file: MemoryFile, partner: Partner | None, title: str
) -> web.Response:
    memory = parts.actions.admin.memory
    find = query.text(request, "find")
    entries = [
        e for e in await memory.entries(file) if not find or find.casefold() in e.text.casefold()
    ]
    pages = query.pages_of(len(entries), ENTRIES_PER_PAGE)
    number = query.page(request, pages)
    shown = entries[(number - 1) * ENTRIES_PER_PAGE : number * ENTRIES_PER_PAGE]
    changes = [c for c in await memory.changes(file.root) if c.file == file.name]
    shown_changes = list(reversed(changes))[:CHANGES_SHOWN]
    wanted = query.text(request, "q")
    results = await search(parts, partner, wanted) if partner and wanted else []
    return parts.render(
        request,
        "memory.html",
        title=title,
        file=file,
        partner=partner,
        partners=parts.catalog.all(),
        entries=shown,
        total=len(entries),
        find=find,
        page=number,
        pages=pages,
        changes=shown_changes,
        undoable={c.id for c in shown_changes if undoable(c)},
        **await _user_file_list(parts, partner, query.text(request, "user")),
        query=wanted,
        results=results,
    )


async def search(parts: WebParts, partner: Partner, query: str) -> list[str]:
    """The partner's history as ``partner_search`` finds it, over everything the owner may
    read (every audience)."""
    admin = parts.actions.admin
    ctx = ToolContext.for_search(parts.store, admin.memory, admin.owner_file, WEB_ACTOR, partner)
    try:
        answer = await partner_search(ctx, {"query": query, "limit": SEARCH_LIMIT})
    except ToolError as exc:
        return [str(exc)]
    return answer.splitlines()

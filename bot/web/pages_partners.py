"""Partners: the list, create/clone/delete, preset.yml as a form, and each persona file in an
editor with a diff before saving.

Creating, cloning, deleting and settings run the ``/admin partner ...`` commands (the form's
fields become ``/admin partner set`` calls, checked by the preset's own model). Saving a file
goes through the memory store's ``replace_file`` with the fingerprint the editor was opened
with: the check ``/admin partner put`` makes. When the file changed meanwhile nothing is
written; the owner's text stays in the editor beside the current version and its diff.
"""

from __future__ import annotations

import asyncio
import difflib

from aiohttp import web

from bot.web.pages import WebParts, form
from partners.memory import FileChanged, MemoryFile, fingerprint
from partners.persona import PROMPT_FILES, Partner
from partners.preset import SETTABLE

MAX_EDIT_CHARS = 512 * 1024


def routes(parts: WebParts) -> list[web.RouteDef]:
    async def partner_list(request: web.Request) -> web.Response:
        return await list_page(parts, request)

    async def create(request: web.Request) -> web.Response:
        data = await form(request)
        answer = await parts.actions.run("partner", "new", data.get("id", ""), data.get("name", ""))
        raise parts.done(request, answer, "/partners")

    async def clone(request: web.Request) -> web.Response:
        source = parts.partner(request.match_info["id"]).id
        data = await form(request)
        answer = await parts.actions.run("partner", "clone", source, data.get("new_id", ""))
        raise parts.done(request, answer, "/partners")

    async def delete(request: web.Request) -> web.Response:
        partner = parts.partner(request.match_info["id"])
        data = await form(request)
        if data.get("sure") != "yes":
            raise parts.done(request, "Tick the box to confirm the deletion.", _url(partner))
        answer = await parts.actions.run("partner", "delete", partner.id, "confirm")
        raise parts.done(request, answer, "/partners")

    async def show(request: web.Request) -> web.Response:
        return await partner_page(parts, request, parts.partner(request.match_info["id"]))

    async def settings(request: web.Request) -> web.Response:
        partner = parts.partner(request.match_info["id"])
        data = await form(request)
        answers = []
        for key, shown in setting_values(partner).items():
            # compared with what the form showed, not with the file now: a form opened
            # before another change must not set that change back
            opened_with = data.get(f"was:{key}", shown).strip()
            wanted = data.get(key, opened_with).strip()
            if wanted != opened_with:
                value = wanted or "default"
                answers.append(await parts.actions.run("partner", "set", partner.id, key, value))
        note = "\n".join(answers) or "Nothing changed."
        raise parts.done(request, note, _url(partner))

    async def edit(request: web.Request) -> web.Response:
        partner = parts.partner(request.match_info["id"])
        name = file_name(request.match_info["name"])
        current = await asyncio.to_thread(_read_bytes, MemoryFile(partner.dir, name))
        text = current.decode("utf-8", "replace")
        return parts.render(
            request,
            "edit.html",
            partner=partner,
            name=name,
            text=text,
            version=fingerprint(current),
            diff=None,
            conflict=None,
        )

    async def save(request: web.Request) -> web.Response:
        partner = parts.partner(request.match_info["id"])
        name = file_name(request.match_info["name"])
        return await save_file(parts, request, partner, name)

    async def export(request: web.Request) -> web.StreamResponse:
        partner = parts.partner(request.match_info["id"])
        return await export_download(parts, partner)

    return [
        web.get("/partners", partner_list),
        web.post("/partners", create),
        web.get("/partners/{id}", show),
        web.post("/partners/{id}/settings", settings),
        web.post("/partners/{id}/clone", clone),
        web.post("/partners/{id}/delete", delete),
        web.get("/partners/{id}/files/{name}", edit),
        web.post("/partners/{id}/files/{name}", save),
        web.get("/partners/{id}/export", export),
    ]


def _url(partner: Partner) -> str:
    return f"/partners/{partner.id}"


def file_name(raw: str) -> str:
    """One of the persona files, by its exact name: anything else (``../preset.yml``,
    ``users/x.md``) is not a file this page edits."""
    if raw not in PROMPT_FILES:
        raise web.HTTPNotFound(text=f"{raw!r} is not a persona file; they are {PROMPT_FILES}.")
    return raw


def _read_bytes(file: MemoryFile) -> bytes:
    try:
        return file.path.read_bytes()
    except FileNotFoundError:
        return b""


async def list_page(parts: WebParts, request: web.Request) -> web.Response:
    active = await parts.store.last_activity()
    bindings = await parts.store.bindings()
    rows = [
        {
            "partner": p,
            "bound": sum(1 for b in bindings if b["partner_id"] == p.id),
            "last": active.get(p.id),
        }
        for p in parts.catalog.all()
    ]
    return parts.render(request, "partners.html", rows=rows, errors=parts.catalog.errors)


def setting_values(partner: Partner) -> dict[str, str]:
    """Each settable key as the form shows it ('' where the default applies)."""
    preset = partner.preset
    proactive = preset.extra.get("proactive") or {}
    values: dict[str, str] = {}
    for key in SETTABLE:
        if key.startswith("proactive."):
            value = proactive.get(key.removeprefix("proactive.")) if proactive else None
        elif key == "language":
            value = preset.language
        else:
            value = getattr(preset, key)
        values[key] = (
            "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
    return values


def _shown(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


async def partner_page(parts: WebParts, request: web.Request, partner: Partner) -> web.Response:
    sizes = {}
    for name in PROMPT_FILES:
        data = await asyncio.to_thread(_read_bytes, MemoryFile(partner.dir, name))
        sizes[name] = len(data.decode("utf-8", "replace"))
    return parts.render(
        request,
        "partner.html",
        partner=partner,
        settings=setting_values(partner),
        help=SETTABLE,
        sizes=sizes,
    )


def _diff(old: str, new: str, old_label: str, new_label: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_label, new_label, lineterm=""
    )
    return "\n".join(lines) or "(no difference)"


async def save_file(
    parts: WebParts, request: web.Request, partner: Partner, name: str
) -> web.Response:
    data = await form(request)
    text = data.get("text", "").replace("\r\n", "\n")
    version = data.get("version", "")
    file = MemoryFile(partner.dir, name)
    current = (await asyncio.to_thread(_read_bytes, file)).decode("utf-8", "replace")
    values = {"partner": partner, "name": name, "text": text, "version": version}
    if len(text) > MAX_EDIT_CHARS:
        values["conflict"] = f"The text is {len(text)} characters; the limit is {MAX_EDIT_CHARS}."
        return parts.render(request, "edit.html", diff=None, **values)
    if data.get("step") != "save":
        diff = _diff(current, text, f"{name} (saved)", f"{name} (yours)")
        return parts.render(request, "edit.html", diff=diff, conflict=None, **values)
    try:
        result = await parts.actions.admin.memory.replace_file(
            file, text, version, reason="edited by the owner", source="web"
        )
    except FileChanged as exc:
        await parts.actions.audit(
            "web partner put", partner=partner.id, file=name, outcome=f"refused: {exc}"
        )
        now = exc.current.decode("utf-8", "replace")
        values["version"] = fingerprint(exc.current)
        return parts.render(
            request,
            "edit.html",
            diff=_diff(now, text, f"{name} (saved meanwhile)", f"{name} (yours)"),
            conflict=f"Not saved: {exc}. Your text is below, unchanged; the diff shows what "
            "differs from the version saved meanwhile. Bring the two together and save again.",
            current=now,
            **values,
        )
    await parts.actions.audit(
        "web partner put", partner=partner.id, file=name, change=result.change_id, outcome="ok"
    )
    note = (
        f"Saved {name} of {partner.name} (change {result.change_id}). It takes effect in new "
        "conversations; running ones keep their prompt."
        if result.change_id
        else f"{name} of {partner.name} is unchanged: nothing to save."
    )
    raise parts.done(request, note, f"/partners/{partner.id}/files/{name}")


async def export_download(parts: WebParts, partner: Partner) -> web.StreamResponse:
    """What ``/admin export`` sends, as a download (or its answer, when too big to send)."""
    reply = await parts.actions.reply("export", partner.id)
    if reply.attachment is None:
        return parts.text_page(reply.text)
    filename, data = reply.attachment
    return web.Response(
        body=data,
        content_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )

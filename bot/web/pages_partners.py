"""Partners: the list, create/clone/delete, preset.yml as a form, and each persona file in an
editor with a diff before saving.

Creating, cloning, deleting and settings run the ``/admin partner ...`` commands (the form's
fields become ``/admin partner set`` calls, checked by the preset's own model). Saving a file
goes through the memory store's ``replace_file`` with the fingerprint the editor was opened
with: the check ``/admin partner put`` makes. When the file changed meanwhile nothing is
written; the owner's text stays in the editor beside the current version and its diff.
"""

from __future__ import annotations

import difflib
from typing import Any

from aiohttp import web

from bot.admin.partners import EDITABLE_FILES
from bot.web.pages import WebParts, form
from partners.memory import MemoryFile
from partners.memory_errors import FileChanged
from partners.memory_format import fingerprint
from partners.persona import Partner
from partners.preset_edit import SETTABLE

MAX_EDIT_CHARS = 512 * 1024
NEW_SESSIONS_NOTE = "It takes effect in new conversations; running ones keep their prompt."


def routes(parts: WebParts) -> list[web.RouteDef]:
    pages = PartnerPages(parts)
    return [
        web.get("/partners", pages.list),
        web.post("/partners", pages.create),
        web.get("/partners/{id}", pages.show),
        web.post("/partners/{id}/settings", pages.settings),
        web.post("/partners/{id}/clone", pages.clone),
        web.post("/partners/{id}/delete", pages.delete),
        web.get("/partners/{id}/files/{name}", pages.edit),
        web.post("/partners/{id}/files/{name}", pages.save),
        web.get("/partners/{id}/export", pages.export),
    ]


def file_name(raw: str) -> str:
    """One of the persona files (those ``/admin partner edit`` edits, POST_HISTORY.md
    included), by its exact name: anything else (``../preset.yml``, ``users/x.md``) is not a
    file this page edits."""
    if raw not in EDITABLE_FILES:
        raise web.HTTPNotFound(text=f"{raw!r} is not a persona file; they are {EDITABLE_FILES}.")
    return raw


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
        elif key == "presence":  # kept with the scene's other keys, unvalidated until read
            value = preset.extra.get("presence")
        else:
            value = getattr(preset, key)
        values[key] = _shown(value)
    return values


def _shown(value: object) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _diff(old: str, new: str, old_label: str, new_label: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_label, new_label, lineterm=""
    )
    return "\n".join(lines) or "(no difference)"


class PartnerPages:
    def __init__(self, parts: WebParts) -> None:
        self.parts = parts
        self._memory = parts.actions.admin.memory

    def _partner(self, request: web.Request) -> Partner:
        return self.parts.partner(request.match_info["id"])

    async def list(self, request: web.Request) -> web.Response:
        active = await self.parts.store.last_activity()
        bindings = await self.parts.store.bindings()
        rows = [
            {
                "partner": p,
                "bound": sum(1 for b in bindings if b["partner_id"] == p.id),
                "last": active.get(p.id),
            }
            for p in self.parts.catalog.all()
        ]
        errors = self.parts.catalog.errors
        return self.parts.render(request, "partners.html", rows=rows, errors=errors)

    async def create(self, request: web.Request) -> web.Response:
        data = await form(request)
        new_id, name = data.get("id", ""), data.get("name", "")
        answer = await self.parts.actions.run("partner", "new", new_id, name)
        raise self.parts.done(request, answer, "/partners")

    async def clone(self, request: web.Request) -> web.Response:
        source = self._partner(request).id
        data = await form(request)
        answer = await self.parts.actions.run("partner", "clone", source, data.get("new_id", ""))
        raise self.parts.done(request, answer, "/partners")

    async def delete(self, request: web.Request) -> web.Response:
        partner = self._partner(request)
        data = await form(request)
        if data.get("sure") != "yes":
            note = "Tick the box to confirm the deletion."
            raise self.parts.done(request, note, f"/partners/{partner.id}")
        answer = await self.parts.actions.run("partner", "delete", partner.id, "confirm")
        raise self.parts.done(request, answer, "/partners")

    async def show(self, request: web.Request) -> web.Response:
        partner = self._partner(request)
        sizes = {}
        for name in EDITABLE_FILES:
            data = (await self._memory.stored(MemoryFile(partner.dir, name))).data
            sizes[name] = len(data.decode("utf-8", "replace"))
        return self.parts.render(
            request,
            "partner.html",
            partner=partner,
            settings=setting_values(partner),
            help=SETTABLE,
            sizes=sizes,
        )

    async def settings(self, request: web.Request) -> web.Response:
        partner = self._partner(request)
        data = await form(request)
        answers = []
        for key, shown in setting_values(partner).items():
            # compared with what the form showed, not with the file now: a form opened
            # before another change must not set that change back
            opened_with = data.get(f"was:{key}", shown).strip()
            wanted = data.get(key, opened_with).strip()
            if wanted != opened_with:
                value = wanted or "default"
                answer = await self.parts.actions.run("partner", "set", partner.id, key, value)
                answers.append(answer)
        note = "\n".join(answers) or "Nothing changed."
        raise self.parts.done(request, note, f"/partners/{partner.id}")

    async def edit(self, request: web.Request) -> web.Response:
        partner = self._partner(request)
        name = file_name(request.match_info["name"])
        current = (await self._memory.stored(MemoryFile(partner.dir, name))).data
        return self._editor(
            request, partner, name, current.decode("utf-8", "replace"), fingerprint(current)
        )

    def _editor(
        self,
        request: web.Request,
        partner: Partner,
        name: str,
        text: str,
        version: str,
        **more: Any,
    ) -> web.Response:
        values: dict[str, Any] = {"diff": None, "conflict": None, **more}
        return self.parts.render(
            request, "edit.html", partner=partner, name=name, text=text, version=version, **values
        )

    async def save(self, request: web.Request) -> web.Response:
        """ "Show the diff" or "Save" (only onto the version the editor was opened with)."""
        partner = self._partner(request)
        name = file_name(request.match_info["name"])
        data = await form(request)
        text = data.get("text", "").replace("\r\n", "\n")
        version = data.get("version", "")
        if len(text) > MAX_EDIT_CHARS:
            too_long = f"The text is {len(text)} characters; the limit is {MAX_EDIT_CHARS}."
            return self._editor(request, partner, name, text, version, conflict=too_long)
        file = MemoryFile(partner.dir, name)
        if data.get("step") != "save":
            saved = (await self._memory.stored(file)).data.decode("utf-8", "replace")
            diff = _diff(saved, text, f"{name} (saved)", f"{name} (yours)")
            return self._editor(request, partner, name, text, version, diff=diff)
        try:
            result = await self.parts.actions.admin.memory.replace_file(
                file, text, version, reason="edited by the owner", source="web"
            )
        except FileChanged as exc:
            return await self._conflict(request, partner, name, text, exc)
        await self.parts.actions.audit(
            "web partner put", partner=partner.id, file=name, change=result.change_id, outcome="ok"
        )
        note = (
            f"Saved {name} of {partner.name} (change {result.change_id}). {NEW_SESSIONS_NOTE}"
            if result.change_id
            else f"{name} of {partner.name} is unchanged: nothing to save."
        )
        raise self.parts.done(request, note, f"/partners/{partner.id}/files/{name}")

    async def _conflict(
        self, request: web.Request, partner: Partner, name: str, text: str, exc: FileChanged
    ) -> web.Response:
        """Nothing was written: the owner's text stays, beside the version saved meanwhile,
        and the editor now carries that version's fingerprint."""
        await self.parts.actions.audit(
            "web partner put", partner=partner.id, file=name, outcome=f"refused: {exc}"
        )
        now = exc.current.decode("utf-8", "replace")
        return self._editor(
            request,
            partner,
            name,
            text,
            fingerprint(exc.current),
            diff=_diff(now, text, f"{name} (saved meanwhile)", f"{name} (yours)"),
            conflict=f"Not saved: {exc}. Your text is below, unchanged; the diff shows what "
            "differs from the version saved meanwhile. Bring the two together and save again.",
            current=now,
        )

    async def export(self, request: web.Request) -> web.StreamResponse:
        """What ``/admin export`` sends, as a download (or its answer, when too big to send)."""
        reply = await self.parts.actions.reply("export", self._partner(request).id)
        if reply.attachment is None:
            return self.parts.text_page(reply.text)
        filename, data = reply.attachment
        return web.Response(
            body=data,
            content_type="application/gzip",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

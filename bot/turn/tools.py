"""The tool registry and the per-turn tool surface.

A turn's surface is: forced tools + configurable tools the partner's allow/deny patterns keep
− suppressed tools. Suppressed tools are removed from the list the model sees *and* refused at
dispatch if the model calls them anyway (the refusal goes back as a tool error and into the
audit log). Patterns are ``pre*``, ``*suf``, ``*mid*`` or an exact name; a pattern that matches
no tool logs a warning instead of failing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.events import ToolCall
from partners.tools import (
    OWNER_MEMORY_TOOL_NAMES,
    OWNER_TOOLS,
    PARTNER_TOOLS,
    ToolContext,
    ToolError,
    ToolSpec,
)

logger = logging.getLogger(__name__)

MAX_ARGUMENT_CHARS = 20_000


def pattern_matches(pattern: str, name: str) -> bool:
    """``pre*``, ``*suf``, ``*mid*`` or exact — nothing else (no wildcards in the middle)."""
    if len(pattern) > 1 and pattern.startswith("*") and pattern.endswith("*"):
        return pattern[1:-1] in name
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return name.endswith(pattern[1:])
    return name == pattern


def filter_configurable(
    names: Iterable[str], allow: Iterable[str], deny: Iterable[str], owner: str
) -> list[str]:
    """Apply allow (a whitelist, if given) then deny; warn about patterns matching nothing."""
    names = list(names)
    allow, deny = list(allow), list(deny)
    for pattern in [*allow, *deny]:
        if not any(pattern_matches(pattern, n) for n in names):
            logger.warning("%s: tool pattern %r matches no tool", owner, pattern)
    kept = [n for n in names if not allow or any(pattern_matches(p, n) for p in allow)]
    return [n for n in kept if not any(pattern_matches(p, n) for p in deny)]


class ToolRegistry:
    """Every tool the gateway knows, with whether an owner may configure it per partner."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._configurable: set[str] = set()

    def register(self, spec: ToolSpec, *, configurable: bool) -> None:
        self._tools[spec.name] = spec
        if configurable:
            self._configurable.add(spec.name)

    def surface(
        self,
        *,
        forced: Iterable[str] = (),
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        suppressed: Iterable[str] = (),
        owner: str = "turn",
    ) -> ToolSurface:
        suppressed = set(suppressed)
        configurable = filter_configurable(sorted(self._configurable), allow, deny, owner)
        names = list(dict.fromkeys([*forced, *configurable]))
        tools = {n: self._tools[n] for n in names if n not in suppressed}
        return ToolSurface(tools, frozenset(suppressed))

    @property
    def names(self) -> list[str]:
        """Every tool's name, mounted or not: none may be taken by another tool."""
        return list(self._tools)


def default_registry() -> ToolRegistry:
    registry = ToolRegistry()
    for spec in PARTNER_TOOLS:
        registry.register(spec, configurable=False)
    for spec in OWNER_TOOLS:
        registry.register(spec, configurable=spec.name in OWNER_MEMORY_TOOL_NAMES)
    return registry


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False


class ToolSurface:
    """The tools of one turn: what the model is shown and what it may call."""

    def __init__(
        self,
        tools: dict[str, ToolSpec],
        suppressed: frozenset[str],
        refused_prefixes: tuple[str, ...] = (),
    ) -> None:
        self.tools = tools
        self.suppressed = suppressed
        self.refused_prefixes = refused_prefixes
        """Names starting so are refused like suppressed ones (another MCP server's tools)."""

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def with_tools(
        self, more: dict[str, ToolSpec], refused: Iterable[str], prefixes: Iterable[str] = ()
    ) -> ToolSurface:
        """This surface and ``more`` tools (never replacing one it has); ``refused`` names
        and names starting with ``prefixes`` are refused at dispatch like suppressed ones."""
        added = {name: spec for name, spec in more.items() if name not in self.tools}
        return ToolSurface(
            {**self.tools, **added},
            self.suppressed | frozenset(refused),
            (*self.refused_prefixes, *prefixes),
        )

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.tools.values()]

    async def call(self, call: ToolCall, ctx: ToolContext) -> ToolOutcome:
        spec = self.tools.get(call.name)
        if spec is None:
            if call.name in self.suppressed or call.name.startswith(self.refused_prefixes):
                await ctx.store.audit(
                    ctx.actor, "tool_refused", tool=call.name, session=ctx.session_id
                )
                return ToolOutcome(f"error: {call.name} is not available to you", True)
            return ToolOutcome(
                f"error: unknown tool {call.name[:80]!r}; available: {', '.join(self.tools)}",
                True,
            )
        try:
            args = parse_arguments(call.arguments)
            return ToolOutcome(await spec.handler(ctx, args))
        except ToolError as exc:
            return ToolOutcome(f"error: {exc}", True)
        except Exception as exc:
            # One tool call is an outer edge: whatever breaks in it (a bug, an unreadable file)
            # is the model's to work around, never the end of the user's turn.
            logger.exception("tool %s failed", call.name)
            return ToolOutcome(
                f"error: {call.name} failed ({type(exc).__name__}); answer without it", True
            )


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool arguments as a dict, or a ToolError the model can act on."""
    if len(raw) > MAX_ARGUMENT_CHARS:
        raise ToolError(f"arguments are {len(raw)} characters; the limit is {MAX_ARGUMENT_CHARS}")
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg}); send a JSON object") from exc
    except RecursionError as exc:
        raise ToolError("arguments are nested too deeply; send a flat JSON object") from exc
    if not isinstance(value, dict):
        raise ToolError("arguments must be a JSON object")
    if any("\x00" in str(v) for v in value.values()):
        raise ToolError("arguments must not contain NUL characters")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no file or database can store it
        raise ToolError("arguments must be valid Unicode (no lone \\ud800-style escapes)") from exc
    return value

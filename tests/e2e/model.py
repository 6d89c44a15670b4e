"""What the fake LLM answers in the end-to-end tests, decided from the request alone.

Every message a test sends carries a tag (``#m17``) and may carry flags:

* ``hold-llm``: the first chat request that sees the tag is held (never answered) until
  :meth:`ScriptedModel.release` — a model that is still thinking when the process dies;
* ``memorize``: the model first calls ``partner_memorize`` with the fact ``fact m17``, then
  answers;
* ``long``: the answer has three paragraphs of ~3000 characters, so Telegram gets three
  chunks, each starting with ``#m17/1``, ``#m17/2``, ``#m17/3``;
* ``hold-review``: the first review request whose conversation shows the tag is held.

A chat answer names every tag of the new user messages it answers (``ok #m17 #m18``), so a
test can tell which inbound messages a reply covers. A review answers with a journal line and
one memory entry per tag (``reviewed m17``) in the first file it may change. The model keeps
no state between requests beyond what tests read: which requests arrived and which facts the
gateway confirmed as saved.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.fake_llm import Failure, Reply, ToolCallSpec

TAG = re.compile(r"#(m\d+)\b")
PARAGRAPH_CHARS = 3000
CHUNKS_OF_LONG = 3
ALLOWED_FILES = re.compile(r"^Files you may change: (.+)$", re.MULTILINE)


def tags(text: str) -> list[str]:
    return list(dict.fromkeys(TAG.findall(text)))


def long_answer(tag: str) -> str:
    filler = "lorem ipsum " * (PARAGRAPH_CHARS // 12)
    return "\n\n".join(f"#{tag}/{part} {filler.strip()}" for part in range(1, CHUNKS_OF_LONG + 1))


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


@dataclass
class ScriptedModel:
    """The fake LLM's responder (``FakeLLM(responder=model)``)."""

    hold_llm: bool = True
    """Honour ``hold-llm`` (a test may turn held answers off for a restart)."""
    answer_delay_seconds: float = 0.0
    """How long each chat answer takes (a model that thinks: turns stay in flight)."""
    chat_requests: dict[str, int] = field(default_factory=dict)
    """Chat requests seen per tag (held ones included)."""
    review_requests: int = 0
    held: dict[str, asyncio.Event] = field(default_factory=dict)
    """tag -> set when a held request for it arrived (chat or review)."""
    answered: dict[str, asyncio.Event] = field(default_factory=dict)
    """tag -> set when an answer naming it left the fake (a final answer or a tool call)."""
    saved: set[str] = field(default_factory=set)
    """Facts the gateway told the model it saved (``saved``/``already saved``)."""
    reviewed: set[str] = field(default_factory=set)
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _held_once: set[str] = field(default_factory=set)

    def release(self) -> None:
        """Let held requests (and every later one) through."""
        self._release.set()

    def rearm(self) -> None:
        """Hold again (after :meth:`release`): each flagged tag is still held only once."""
        self._release = asyncio.Event()

    def arrived(self, tag: str) -> asyncio.Event:
        return self.held.setdefault(tag, asyncio.Event())

    def answered_event(self, tag: str) -> asyncio.Event:
        return self.answered.setdefault(tag, asyncio.Event())

    async def __call__(self, body: dict[str, Any]) -> Reply | Failure:
        messages = body.get("messages") or []
        if body.get("response_format"):
            return await self._review(_content(messages[-1]) if messages else "")
        return await self._chat(messages)

    # ---- chat turns ------------------------------------------------------------------

    async def _chat(self, messages: list[dict[str, Any]]) -> Reply:
        new = _new_user_texts(messages)
        found = tags("\n".join(new))
        self._note_saved(messages)
        for tag in found:
            self.chat_requests[tag] = self.chat_requests.get(tag, 0) + 1
        joined = "\n".join(new)
        hold_key = f"chat:{','.join(found)}"
        if self.hold_llm and "hold-llm" in joined and hold_key not in self._held_once:
            self._held_once.add(hold_key)
            for tag in found:
                self.arrived(tag).set()
            await self._release.wait()
        in_tool_round = bool(messages) and messages[-1].get("role") == "tool"
        to_memorize = [t for t in found if _flagged(new, t, "memorize")]
        if to_memorize and not in_tool_round:
            calls = [
                ToolCallSpec("partner_memorize", {"op": "add", "text": f"fact {t}"})
                for t in to_memorize
            ]
            self._answered(found)
            return Reply(tool_calls=calls)
        if any(_flagged(new, t, "long") for t in found):
            text = "\n\n".join(long_answer(t) for t in found)
        else:
            text = "ok " + " ".join(f"#{t}" for t in found) if found else "ok"
        self._answered(found)
        return Reply(text=text, delay_seconds=self.answer_delay_seconds)

    def _answered(self, found: list[str]) -> None:
        for tag in found:
            self.answered_event(tag).set()

    def _note_saved(self, messages: list[dict[str, Any]]) -> None:
        calls: dict[str, str] = {}
        for message in messages:
            for call in message.get("tool_calls") or []:
                arguments = json.loads(call["function"]["arguments"] or "{}")
                calls[call["id"]] = str(arguments.get("text", ""))
            if message.get("role") == "tool":
                result = _content(message)
                if result.startswith(("saved (entry=", "already saved")):
                    self.saved.add(calls.get(str(message.get("tool_call_id")), ""))

    # ---- reviews ---------------------------------------------------------------------

    async def _review(self, prompt: str) -> Reply:
        self.review_requests += 1
        conversation = prompt.split("## The new part of the conversation", 1)[-1]
        found = tags(conversation)
        hold_key = f"review:{','.join(found)}"
        if "hold-review" in conversation and hold_key not in self._held_once:
            self._held_once.add(hold_key)
            for tag in found:
                self.arrived(tag).set()
            await self._release.wait()
        allowed = ALLOWED_FILES.search(prompt)
        files = [f.strip() for f in allowed.group(1).split(",")] if allowed else []
        memory = []
        if files and not files[0].startswith("none"):
            memory = [{"file": files[0], "op": "add", "text": f"reviewed {t}"} for t in found]
        self.reviewed.update(found)
        answer = {"journal": {"summary": f"talked about {' '.join(found)}"}, "memory": memory}
        return Reply(text=json.dumps(answer))


def _new_user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The user messages of this turn: those after the last final assistant answer."""
    texts: list[str] = []
    for message in reversed(messages):
        role = message.get("role")
        if role == "assistant" and not message.get("tool_calls"):
            break
        if role == "user":
            texts.append(_content(message))
    return list(reversed(texts))


def _flagged(texts: list[str], tag: str, flag: str) -> bool:
    return any(f"#{tag}" in text and flag in text for text in texts)

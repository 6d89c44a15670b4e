"""Fake OpenAI-compatible chat-completions and audio server for offline tests.

The gateway talks to LLM providers through the real ``openai.AsyncOpenAI`` client. Tests point
that client at :class:`FakeLLM`, a small aiohttp server bound to ``127.0.0.1`` on a random port
and started inside the test's own event loop. The fake answers ``POST /v1/chat/completions``
from a FIFO script of :class:`Reply` / :class:`Failure` items, falling back to a responder
function, and serves both plain JSON and SSE streaming responses (text deltas, streamed
tool-call deltas, the optional usage chunk). It records every request body so tests can assert
on prompts, tools and parameters, and it can inject rate limits, provider errors, outages and
delays long enough to trigger client timeouts.

Speech and images, as an OpenAI-compatible endpoint (or a local whisper/Kokoro server) serves
them: ``POST /v1/audio/transcriptions`` answers a scripted transcript (:meth:`FakeLLM.
script_transcripts`) and records the audio bytes, file name and model it got
(``transcriptions``), or a scripted failure, malformed body or answer cut off mid-way
(:class:`Cut`); ``POST /v1/audio/speech`` answers a small valid OGG/Opus file made by
:mod:`tests.fakes.ogg_opus` and records the text it was asked to speak (``speeches``). Image
parts of chat requests are recorded in ``image_parts``. Each rejects what the real service
rejects: an audio file of an unknown format or over 25 MB, a speech input over 4096
characters or without a voice, an image part that is not an image.

Embeddings: ``POST /v1/embeddings`` answers deterministic vectors (:func:`fake_embedding`: a
hashed bag of the text's lower-cased words, seeded by the model name, so texts that share
words are close and two models' vectors are unrelated). Each request is recorded in
``embedding_requests``; ``embeddings_down`` answers 503, :meth:`FakeLLM.script_embeddings`
queues failures, and ``embedding_gate`` holds requests (a slow endpoint) until it is set.
An endpoint that answers 200 with nonsense is ``embedding_answers`` (what one text's
``embedding`` is instead of its vector: NaN, strings, another size) and ``embedding_rewrite``
(the whole answer body rewritten: a vector missing, ``data`` that is no list).

Typical use::

    async with FakeLLM() as llm:
        llm.script(Reply(text="hi"), Failure(429, retry_after_ms=10))
        client = AsyncOpenAI(base_url=llm.base_url, api_key="x")
        ...
        await llm.wait_for_requests(2)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import inspect
import itertools
import json
import math
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.ogg_opus import make_ogg_opus

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "FAKE_MODEL_ID",
    "Cut",
    "Failure",
    "ImagePart",
    "SpeechRequest",
    "TranscriptionRequest",
    "FakeLLM",
    "Malformed",
    "Reply",
    "Responder",
    "ToolCallSpec",
    "fake_embedding",
]

FAKE_MODEL_ID = "fake-model"
EMBEDDING_DIMENSIONS = 256
"""Size of the fake's vectors (hashed word buckets)."""
WORD = re.compile(r"\w+")

# Number of pieces a streamed text (content or reasoning) is split into, at most.
_TEXT_PIECES = 4
# Number of pieces streamed tool-call arguments are split into, at most (at least 2 if possible).
_ARGUMENT_PIECES = 3
# Seconds aiohttp waits for in-flight handlers on close before cancelling them.
_SHUTDOWN_TIMEOUT = 0.5

MAX_AUDIO_BYTES = 25 * 1024 * 1024
"""OpenAI's limit for one transcription upload."""
AUDIO_FORMATS = frozenset(
    {"flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"}
)
MAX_SPEECH_CHARS = 4096
SPEECH_SECONDS_PER_CHAR = 0.06
"""How long the fake's synthesised silence lasts per character of input (a talking pace)."""
IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"RIFF")

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


@dataclass
class ToolCallSpec:
    """A tool call the fake model makes.

    ``arguments`` given as a dict is JSON-encoded; a string is sent verbatim, so tests can send
    arguments that are not valid JSON on purpose. ``id`` defaults to a generated ``call_<n>``.
    """

    name: str
    arguments: str | dict[str, Any]
    id: str | None = None


@dataclass
class Reply:
    """A successful completion.

    ``prompt_tokens`` defaults to ``len(request_json) / 4``; ``completion_tokens`` to
    ``len(text) / 4`` rounded up (at least 1). ``finish_reason`` defaults to ``"tool_calls"``
    when there are tool calls, else ``"stop"``. ``delay_seconds`` is waited before answering.
    """

    text: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    reasoning_content: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    delay_seconds: float = 0.0
    finish_reason: str | None = None


@dataclass
class Failure:
    """An error response: ``{"error": {"message", "type", "code", "param"}}`` with ``status``.

    ``retry_after_ms`` is sent as the ``retry-after-ms`` header and, rounded up to whole
    seconds, as ``retry-after``. ``type`` defaults to a value derived from ``status``.
    """

    status: int
    message: str = "injected failure"
    code: str | None = None
    retry_after_ms: int | None = None
    delay_seconds: float = 0.0
    type: str | None = None


@dataclass
class Malformed:
    """A 200 answer that is not a proper completion, as a misbehaving proxy or local server
    sends one: ``body`` goes out as it is (a dict or list as JSON, a string verbatim; bytes
    verbatim too, as a transcription answer)."""

    body: Any
    content_type: str = "application/json"
    delay_seconds: float = 0.0


Outcome = Reply | Failure | Malformed


@dataclass
class Cut:
    """A 200 answer that stops part-way: its headers promise all of ``body``, then the
    connection closes after ``sent_bytes`` of it (a server or proxy that dies mid-answer)."""

    body: bytes
    sent_bytes: int
    content_type: str = "application/json"


Transcript = str | Failure | Malformed | Cut
"""What a transcription request answers: the text, an error, a body that is not a proper
answer, or an answer cut off."""


@dataclass(frozen=True)
class TranscriptionRequest:
    """One upload to ``/v1/audio/transcriptions``, as the fake received it."""

    model: str
    filename: str
    data: bytes
    content_type: str
    fields: dict[str, str]

    @property
    def format(self) -> str:
        return self.filename.rpartition(".")[2].lower()


@dataclass(frozen=True)
class SpeechRequest:
    """One request to ``/v1/audio/speech``: the text it was asked to speak."""

    model: str
    input: str
    voice: str
    response_format: str


@dataclass(frozen=True)
class ImagePart:
    """An ``image_url`` part of a chat request: which request, and the image's bytes."""

    request_index: int
    url: str
    data: bytes


Responder = Callable[[dict[str, Any]], Outcome | Awaitable[Outcome]]


def fake_embedding(
    text: str,
    seed: str,
    synonyms: dict[str, str] | None = None,
    dimensions: int = EMBEDDING_DIMENSIONS,
) -> list[float]:
    """The fake's vector for ``text``: one bucket per lower-cased word (CJK text one per
    character), chosen by a hash seeded with ``seed`` (the model name, by default), after
    ``synonyms`` folded words to what they mean — the one thing a real model knows that
    lexical search does not. Texts sharing no word are orthogonal (unless two words share a
    bucket); a text without words gets a bucket of its own."""
    vector = [0.0] * dimensions
    words = [w for token in WORD.findall(text.lower()) for w in _units(token)] or [text]
    for word in words:
        meaning = (synonyms or {}).get(word, word)
        digest = hashlib.sha256(f"{seed}\x00{meaning}".encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dimensions] += 1.0
    return vector


def _units(token: str) -> list[str]:
    """A word, or each character of a run of CJK ideographs, kana or Hangul (no spaces there)."""
    if all(ord(c) >= 0x3000 for c in token):
        return list(token)
    return [token]


def _default_responder(request: dict[str, Any]) -> Reply:  # noqa: ARG001
    return Reply(text="ok")


_FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _tools_problem(tools: Any) -> str | None:
    """What OpenAI's API refuses in a request's ``tools`` (None: nothing): a tool that is not a
    function with a valid name, or parameters that are not a JSON Schema of type object."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "Invalid type for 'tools': expected an array."
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            return f"Invalid value for 'tools[{index}]': expected a function tool."
        name = function.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
            return f"Invalid 'tools[{index}].function.name': string does not match pattern."
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            kind = parameters.get("type") if isinstance(parameters, dict) else None
            return (
                f"Invalid schema for function '{name}': schema must be a JSON Schema of "
                f"'type: \"object\"', got 'type: \"{kind}\"'."
            )
        if not isinstance(parameters.get("properties", {}), dict):
            return f"Invalid schema for function '{name}': 'properties' must be an object."
    return None


def _split(text: str, pieces: int) -> list[str]:
    """Split ``text`` into at most ``pieces`` non-empty consecutive parts."""
    if not text:
        return []
    size = max(1, math.ceil(len(text) / pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _image_parts(body: dict[str, Any], request_index: int) -> list[ImagePart]:
    """The image parts of a chat request; raises ValueError for one that is not an image."""
    found = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            url = str((part.get("image_url") or {}).get("url") or "")
            header, _, encoded = url.partition(",")
            if not header.startswith("data:image/") or not header.endswith(";base64"):
                raise ValueError("expected a base64 data URL of an image")
            try:
                data = base64.b64decode(encoded, validate=True)
            except binascii.Error as exc:
                raise ValueError("the data URL is not valid base64") from exc
            if not data.startswith(IMAGE_SIGNATURES):
                raise ValueError("the data is not a JPEG, PNG, GIF or WebP image")
            found.append(ImagePart(request_index, url, data))
    return found


def _message_text(content: Any) -> str:
    """Text of a message ``content`` that is a string or a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        return "".join(parts)
    return str(content)


class FakeLLM:
    """OpenAI-compatible chat-completions server on ``127.0.0.1`` for tests.

    Scripted items (:meth:`script`) are consumed first, in order; when the queue is empty the
    ``responder`` is called with the parsed request body (it may be sync or async). While
    ``down`` is true every request gets a 503 without consuming the queue. Every parsed request
    body is appended to ``requests`` (failed ones too), and its headers to ``request_headers``.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder | None = responder
        #: What ``GET /v1/models`` lists; None answers 404, as endpoints without a list do.
        self.models: list[str] | None = [FAKE_MODEL_ID]
        #: Chat completions for a model not in ``models`` get 404 ``model_not_found``.
        self.reject_unknown_models = False
        #: When set, every request needs ``Authorization: Bearer <api_key>`` or gets 401.
        self.api_key: str | None = None
        #: ``GET /v1/models`` requests (they are not in :attr:`requests`).
        self.model_list_requests = 0
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.errors: list[BaseException] = []
        self.down: bool = False
        self.transcriptions: list[TranscriptionRequest] = []
        self.speeches: list[SpeechRequest] = []
        self.image_parts: list[ImagePart] = []
        self.speech_down: bool = False
        """While true, both audio endpoints answer 503 (a speech server that is down)."""
        self.transcription_text: Callable[[TranscriptionRequest], str] = lambda _r: "hello"
        """The transcript when none is scripted."""
        self.transcription_gate: asyncio.Event | None = None
        """While set to an unset Event, transcriptions are held (recorded, not answered)."""
        self.embedding_requests: list[dict[str, Any]] = []
        """Bodies of ``/v1/embeddings`` requests (failed ones too)."""
        self.embeddings_down = False
        """While true, ``/v1/embeddings`` answers 503 (an embedding server that is down)."""
        self.embedding_gate: asyncio.Event | None = None
        """While set to an unset Event, embedding requests are held (recorded, not answered)."""
        self.embedding_synonyms: dict[str, str] = {}
        """Words the fake model takes to mean another (``{"kitten": "cat"}``)."""
        self.embedding_max_chars: int | None = None
        """When set, a request with a longer input gets 400 (a model's context is full)."""
        self.embedding_seed: str | None = None
        """When set, every model's vectors are hashed alike (by default each model differs)."""
        self.embedding_answers: dict[str, Any] = {}
        """Texts whose ``embedding`` is answered as the given value instead of their vector
        (``[math.nan] * 256``, ``"abc"``, a list of another size: a model gone wrong)."""
        self.embedding_rewrite: Callable[[dict[str, Any]], Any] | None = None
        """When set, the body of a successful embeddings answer is passed through it and its
        result answered (a vector left out, ``data`` that is not a list, ...); bytes are sent
        as they are (a body that is no JSON)."""
        self._embedding_failures: deque[Failure] = deque()
        self._transcripts: deque[Transcript] = deque()
        self._queue: deque[Outcome] = deque()
        self._counter = itertools.count(1)
        self._condition = asyncio.Condition()
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind ``127.0.0.1`` on a random free port and start serving."""
        if self._runner is not None:
            raise RuntimeError("FakeLLM is already started")
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_chat_completions)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_post("/v1/audio/transcriptions", self._handle_transcription)
        app.router.add_post("/v1/audio/speech", self._handle_speech)
        app.router.add_post("/v1/embeddings", self._handle_embeddings)
        runner = web.AppRunner(
            app,
            handler_cancellation=True,
            shutdown_timeout=_SHUTDOWN_TIMEOUT,
            access_log=None,
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._closing.clear()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def close(self) -> None:
        """Stop serving; pending delays are cut short so this returns quickly. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._closing.set()
        await runner.cleanup()

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, to pass as ``AsyncOpenAI(base_url=...)``."""
        if self._port is None:
            raise RuntimeError("FakeLLM is not started; call start() or use 'async with'")
        return f"http://127.0.0.1:{self._port}/v1"

    # -- test controls -----------------------------------------------------------------------

    def script(self, *items: Outcome) -> None:
        """Append replies/failures to the FIFO queue consumed before the responder."""
        for item in items:
            if not isinstance(item, Reply | Failure | Malformed):
                raise TypeError(f"script() takes Reply, Failure or Malformed, got {item!r}")
        self._queue.extend(items)

    def script_transcripts(self, *items: Transcript) -> None:
        """Transcripts (or failures, malformed or cut answers) the next transcription
        requests answer, in order."""
        self._transcripts.extend(items)

    def script_embeddings(self, *failures: Failure) -> None:
        """Failures the next embedding requests answer, in order (then vectors again); a
        failure's ``delay_seconds`` is waited first (an endpoint that times out, then fails)."""
        self._embedding_failures.extend(failures)

    async def wait_for_embeddings(
        self,
        n: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - the public API takes a timeout
    ) -> list[dict[str, Any]]:
        """Wait until at least ``n`` embedding requests arrived; return all so far."""
        async with asyncio.timeout(timeout), self._condition:
            await self._condition.wait_for(lambda: len(self.embedding_requests) >= n)
        return list(self.embedding_requests)

    @property
    def queued(self) -> int:
        """Number of scripted items not consumed yet."""
        return len(self._queue)

    async def wait_for_transcriptions(
        self,
        n: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - the public API takes a timeout
    ) -> list[TranscriptionRequest]:
        """Wait until at least ``n`` transcription requests arrived; return all so far."""
        async with asyncio.timeout(timeout), self._condition:
            await self._condition.wait_for(lambda: len(self.transcriptions) >= n)
        return list(self.transcriptions)

    async def wait_for_requests(
        self,
        n: int,
        timeout: float = 5.0,  # noqa: ASYNC109 - the public API takes a timeout
    ) -> list[dict[str, Any]]:
        """Wait until at least ``n`` chat-completion requests arrived; return all so far.

        Raises :class:`TimeoutError` if fewer than ``n`` arrive within ``timeout`` seconds.
        """
        try:
            async with asyncio.timeout(timeout), self._condition:
                await self._condition.wait_for(lambda: len(self.requests) >= n)
        except TimeoutError:
            raise TimeoutError(
                f"expected {n} chat completion request(s) within {timeout}s, "
                f"got {len(self.requests)}"
            ) from None
        return list(self.requests)

    def last_user_text(self, request: dict[str, Any] | None = None) -> str:
        """Text of the last ``role == "user"`` message of ``request`` (default: last request).

        List content (text parts) is joined; returns ``""`` if there is no user message.
        """
        if request is None:
            if not self.requests:
                raise LookupError("FakeLLM has received no chat completion request yet")
            request = self.requests[-1]
        messages = request.get("messages")
        if not isinstance(messages, list):
            return ""
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _message_text(message.get("content"))
        return ""

    # -- handlers ----------------------------------------------------------------------------

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        """The 401 OpenAI sends for a missing or wrong key, when :attr:`api_key` is set."""
        if self.api_key is None:
            return None
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return self._error_response(
            Failure(401, "Incorrect API key provided", code="invalid_api_key")
        )

    async def _handle_models(self, request: web.Request) -> web.Response:
        self.model_list_requests += 1
        refused = self._unauthorized(request)
        if refused is not None:
            return refused
        if self.models is None:
            return self._error_response(Failure(404, "Not Found"))
        body = {
            "object": "list",
            "data": [
                {"id": model, "object": "model", "created": 0, "owned_by": "fake-llm"}
                for model in self.models
            ],
        }
        return self._json_response(body)

    async def _handle_chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return self._error_response(Failure(400, "request body is not valid JSON"))
        if not isinstance(body, dict):
            return self._error_response(Failure(400, "request body must be a JSON object"))

        try:
            images = _image_parts(body, len(self.requests))
        except ValueError as exc:
            images = []
            rejected: Failure | None = Failure(400, f"Invalid image: {exc}")
        else:
            rejected = None
        async with self._condition:
            self.requests.append(body)
            self.request_headers.append(dict(request.headers))
            self.image_parts.extend(images)
            self._condition.notify_all()

        if rejected is not None:
            return self._error_response(rejected)
        refused = self._unauthorized(request)
        if refused is not None:
            return refused
        model = body.get("model")
        if self.reject_unknown_models and model not in (self.models or []):
            return self._error_response(
                Failure(404, f"The model `{model}` does not exist", code="model_not_found")
            )
        if self.down:
            return self._error_response(
                Failure(503, "service unavailable (simulated outage)", type="server_error")
            )
        if problem := _tools_problem(body.get("tools")):
            return self._error_response(Failure(400, problem))

        outcome = await self._next_outcome(body)
        await self._delay(outcome.delay_seconds)
        if self._closing.is_set():
            return self._error_response(Failure(503, "fake server is shutting down"))
        if isinstance(outcome, Failure):
            return self._error_response(outcome)
        if isinstance(outcome, Malformed):
            raw = outcome.body if isinstance(outcome.body, str) else json.dumps(outcome.body)
            return web.Response(text=raw, content_type=outcome.content_type)
        if body.get("stream") is True:
            return await self._stream_reply(request, body, outcome)
        return self._json_response(self._completion(body, outcome))

    async def _handle_transcription(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return self._error_response(Failure(400, "'file' is a required property"))
        fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        entry = TranscriptionRequest(
            fields.get("model", ""),
            upload.filename,
            upload.file.read(),
            upload.content_type,
            fields,
        )
        async with self._condition:
            self.transcriptions.append(entry)
            self._condition.notify_all()
        if self.transcription_gate is not None:
            await self.transcription_gate.wait()
        if self.speech_down:
            return self._error_response(Failure(503, "speech server unavailable"))
        if not entry.model:
            return self._error_response(Failure(400, "'model' is a required property"))
        if len(entry.data) > MAX_AUDIO_BYTES:
            return self._error_response(Failure(413, "Maximum content size limit exceeded"))
        if entry.format not in AUDIO_FORMATS:
            return self._error_response(
                Failure(400, f"Invalid file format. Supported formats: {sorted(AUDIO_FORMATS)}")
            )
        scripted = self._transcripts.popleft() if self._transcripts else None
        if isinstance(scripted, Failure):
            return self._error_response(scripted)
        if isinstance(scripted, Malformed):
            raw = scripted.body
            if not isinstance(raw, str | bytes):
                raw = json.dumps(raw)
            if isinstance(raw, str):
                raw = raw.encode()
            return web.Response(body=raw, content_type=scripted.content_type)
        if isinstance(scripted, Cut):
            return await self._cut_answer(request, scripted)
        text = scripted if scripted is not None else self.transcription_text(entry)
        return self._json_response({"text": text})

    @staticmethod
    async def _cut_answer(request: web.Request, cut: Cut) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": cut.content_type})
        response.content_length = len(cut.body)
        await response.prepare(request)
        await response.write(cut.body[: cut.sent_bytes])
        if request.transport is not None:
            request.transport.close()
        return response

    async def _handle_speech(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return self._error_response(Failure(400, "request body is not valid JSON"))
        entry = SpeechRequest(
            str(body.get("model") or ""),
            str(body.get("input") or ""),
            str(body.get("voice") or ""),
            str(body.get("response_format") or "mp3"),
        )
        async with self._condition:
            self.speeches.append(entry)
            self._condition.notify_all()
        if self.speech_down:
            return self._error_response(Failure(503, "speech server unavailable"))
        if not entry.model or not entry.voice or not entry.input.strip():
            return self._error_response(Failure(400, "'model', 'input' and 'voice' are required"))
        if len(entry.input) > MAX_SPEECH_CHARS:
            return self._error_response(
                Failure(400, f"'input' is longer than {MAX_SPEECH_CHARS} characters")
            )
        if entry.response_format != "opus":
            # the fake makes only Opus; a real server would also make mp3, aac, flac, wav, pcm
            return self._error_response(Failure(400, "the fake speaks only response_format=opus"))
        audio = make_ogg_opus(round(max(0.2, len(entry.input) * SPEECH_SECONDS_PER_CHAR), 1))
        return web.Response(body=audio, content_type="audio/ogg")

    async def _handle_embeddings(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return self._error_response(Failure(400, "request body is not valid JSON"))
        async with self._condition:
            self.embedding_requests.append(body)
            self._condition.notify_all()
        if self.embedding_gate is not None:
            await self.embedding_gate.wait()
        if self.embeddings_down:
            return self._error_response(Failure(503, "embedding server unavailable"))
        if self._embedding_failures:
            failure = self._embedding_failures.popleft()
            await self._delay(failure.delay_seconds)
            return self._error_response(failure)
        refused = self._unauthorized(request)
        if refused is not None:
            return refused
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str) or not model:
            return self._error_response(Failure(400, "'model' is a required property"))
        if self.reject_unknown_models and model not in (self.models or []):
            return self._error_response(
                Failure(404, f"The model `{model}` does not exist", code="model_not_found")
            )
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self._error_response(Failure(400, "'input' must be a string or strings"))
        if any(not t for t in texts):
            return self._error_response(Failure(400, "'input' cannot contain an empty string"))
        limit = self.embedding_max_chars
        if limit is not None and any(len(t) > limit for t in texts):
            return self._error_response(
                Failure(400, "This model's maximum context length is exceeded")
            )
        data = [
            {"object": "embedding", "index": i, "embedding": self._embedding(text, model)}
            for i, text in enumerate(texts)
        ]
        tokens = sum(_estimate_tokens(t) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        answer = {"object": "list", "data": data, "model": model, "usage": usage}
        if self.embedding_rewrite is not None:
            answer = self.embedding_rewrite(answer)
        if isinstance(answer, bytes):
            return web.Response(body=answer, content_type="application/json")
        return self._json_response(answer)

    def _embedding(self, text: str, model: str) -> Any:
        if text in self.embedding_answers:
            return self.embedding_answers[text]  # NaN and Infinity go out as JSON's extension
        return fake_embedding(text, self.embedding_seed or model, self.embedding_synonyms)

    async def _next_outcome(self, body: dict[str, Any]) -> Outcome:
        if self._queue:
            return self._queue.popleft()
        responder = self.responder or _default_responder
        try:
            result = responder(body)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            self.errors.append(exc)
            return Failure(500, f"responder raised {exc!r}", type="server_error")
        if not isinstance(result, Reply | Failure | Malformed):
            error = TypeError(f"responder must return Reply or Failure, got {result!r}")
            self.errors.append(error)
            return Failure(500, str(error), type="server_error")
        return result

    async def _delay(self, seconds: float) -> None:
        """Sleep ``seconds`` unless the server is closing."""
        if seconds <= 0:
            return
        try:
            async with asyncio.timeout(seconds):
                await self._closing.wait()
        except TimeoutError:
            pass

    # -- response building -------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter)}"

    def _json_response(self, body: Any, status: int = 200) -> web.Response:
        return web.Response(
            body=json.dumps(body).encode(),
            status=status,
            content_type="application/json",
            headers={"x-request-id": self._next_id("req_")},
        )

    def _error_response(self, failure: Failure) -> web.Response:
        error_type = failure.type or _ERROR_TYPES.get(
            failure.status, "server_error" if failure.status >= 500 else "invalid_request_error"
        )
        body = {
            "error": {
                "message": failure.message,
                "type": error_type,
                "param": None,
                "code": failure.code,
            }
        }
        response = self._json_response(body, status=failure.status)
        if failure.retry_after_ms is not None:
            response.headers["retry-after-ms"] = str(failure.retry_after_ms)
            response.headers["retry-after"] = str(math.ceil(failure.retry_after_ms / 1000))
        return response

    def _tool_calls(self, reply: Reply) -> list[dict[str, Any]]:
        calls = []
        for spec in reply.tool_calls:
            arguments = (
                spec.arguments
                if isinstance(spec.arguments, str)
                else json.dumps(spec.arguments, ensure_ascii=False)
            )
            calls.append(
                {
                    "id": spec.id or self._next_id("call_"),
                    "type": "function",
                    "function": {"name": spec.name, "arguments": arguments},
                }
            )
        return calls

    @staticmethod
    def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = max(1, len(json.dumps(body, ensure_ascii=False)) // 4)
        completion = reply.completion_tokens
        if completion is None:
            completion = _estimate_tokens(reply.text or "")
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    @staticmethod
    def _finish_reason(reply: Reply) -> str:
        if reply.finish_reason is not None:
            return reply.finish_reason
        return "tool_calls" if reply.tool_calls else "stop"

    @staticmethod
    def _model(body: dict[str, Any]) -> str:
        model = body.get("model")
        return model if isinstance(model, str) else FAKE_MODEL_ID

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        tool_calls = self._tool_calls(reply)
        if tool_calls:
            message["tool_calls"] = tool_calls
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        return {
            "id": self._next_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model(body),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish_reason(reply),
                }
            ],
            "usage": self._usage(body, reply),
        }

    def _chunks(self, body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
        """All ``chat.completion.chunk`` objects of a streamed reply, in order."""
        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage")
        completion_id = self._next_id("chatcmpl-")
        created = int(time.time())
        model = self._model(body)

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                data["usage"] = None
            return data

        chunks = [chunk({"role": "assistant", "content": "" if reply.text is not None else None})]
        for piece in _split(reply.reasoning_content or "", _TEXT_PIECES):
            chunks.append(chunk({"content": None, "reasoning_content": piece}))
        for piece in _split(reply.text or "", _TEXT_PIECES):
            chunks.append(chunk({"content": piece}))
        for index, call in enumerate(self._tool_calls(reply)):
            function = call["function"]
            first = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": ""},
            }
            chunks.append(chunk({"tool_calls": [first]}))
            for piece in _split(function["arguments"], _ARGUMENT_PIECES):
                delta = {"index": index, "function": {"arguments": piece}}
                chunks.append(chunk({"tool_calls": [delta]}))
        chunks.append(chunk({}, self._finish_reason(reply)))
        if include_usage:
            usage_chunk = chunk({})
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self._usage(body, reply)
            chunks.append(usage_chunk)
        return chunks

    async def _stream_reply(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "x-request-id": self._next_id("req_"),
            },
        )
        await response.prepare(request)
        try:
            for data in self._chunks(body, reply):
                await response.write(f"data: {json.dumps(data)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away mid-stream
        return response

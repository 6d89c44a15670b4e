"""Is the ``[embeddings]`` endpoint usable, and if not, exactly what to change: for doctor.

The same first-run mistakes as the chat endpoint's (:mod:`bot.services.llm_check`), met on
``/embeddings``: nothing listens on the port, the base URL lacks ``/v1``, the model is not one
the endpoint serves (or not an embedding model), the endpoint wants a key (401), the answer is
no usable vector (NaN, strings, base64 from a server that ignores ``encoding_format``). The
check embeds one word with the configured model and turns the first thing that goes wrong into
one line naming the setting and the fix. Keys are never part of a message.
"""

from __future__ import annotations

import json

import openai

from bot.config.services import EmbeddingsConfig, LLMConfig
from bot.services.embeddings import NO_KEY, EmbeddingsUnavailable, answered, api_key
from bot.services.llm_check import CHECK_SECONDS, MODELS_SHOWN, connection_refused, root_cause

TEST_INPUT = "ok"


async def check_embeddings(
    config: EmbeddingsConfig, llm: LLMConfig, *, wait_seconds: float = CHECK_SECONDS
) -> str | None:
    """One line naming what is wrong with the embeddings endpoint and the fix; None when it
    embeds a word with the configured model."""
    url, model = (config.base_url or "").rstrip("/"), config.model or ""
    async with _client(config, llm, url, wait_seconds) as client:
        try:
            response = await client.embeddings.create(
                model=model, input=[TEST_INPUT], encoding_format="float"
            )
        except openai.NotFoundError as exc:
            if "model" in f"{exc.code} {exc.message}".lower():
                return await _unknown_model(client, model, url)
            return await _wrong_path(config, llm, url, wait_seconds)
        except openai.BadRequestError as exc:
            return (
                f"{url} refused to embed one word with model {model!r} (400: {exc.message}): "
                "set embeddings.model to an embedding model the endpoint serves"
            )
        except openai.APIError as exc:
            return _problem(exc, config, llm, url, wait_seconds)
        except (ValueError, RecursionError):  # not JSON, or JSON nested too deep
            return _not_embeddings(url)
    try:
        [values] = answered(response, 1)
    except EmbeddingsUnavailable:
        return _not_embeddings(url)
    return _unusable(values, url, model)


def _client(
    config: EmbeddingsConfig, llm: LLMConfig, url: str, wait_seconds: float
) -> openai.AsyncOpenAI:
    key = api_key(config, llm)
    return openai.AsyncOpenAI(
        base_url=url,
        api_key=key.get_secret_value() if key else NO_KEY,
        timeout=wait_seconds,
        max_retries=0,
    )


async def _unknown_model(client: openai.AsyncOpenAI, model: str, url: str) -> str:
    problem = f"model {model!r} is not served by {url}"
    try:
        models = [str(m.id) for m in (await client.models.list()).data]
    except (openai.APIError, AttributeError, TypeError, json.JSONDecodeError):
        models = []
    if models:
        more = ", …" if len(models) > MODELS_SHOWN else ""
        problem += f"; it has: {', '.join(models[:MODELS_SHOWN])}{more}"
    return (
        f"{problem}. Set embeddings.model to an embedding model it has (Ollama: "
        f"`ollama pull {model}`)"
    )


async def _wrong_path(
    config: EmbeddingsConfig, llm: LLMConfig, url: str, wait_seconds: float
) -> str:
    if not url.endswith("/v1"):
        async with _client(config, llm, f"{url}/v1", wait_seconds) as client:
            try:
                await client.embeddings.create(model=config.model or "", input=[TEST_INPUT])
                answers = True
            except openai.APIStatusError as exc:
                answers = exc.status_code != 404 or "model" in f"{exc.code} {exc.message}".lower()
            except (openai.APIError, json.JSONDecodeError, ValueError):
                answers = False
        if answers:
            return (
                f"{url} has no OpenAI-compatible API, but {url}/v1 has: set "
                f'embeddings.base_url = "{url}/v1" in config.toml'
            )
    return (
        f"{url}/embeddings does not exist (404): is embeddings.base_url the API's address? "
        "OpenAI-compatible ones usually end in /v1"
    )


def _problem(
    exc: openai.APIError, config: EmbeddingsConfig, llm: LLMConfig, url: str, wait_seconds: float
) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"the embeddings endpoint {url} did not answer within {wait_seconds:g} s: is it "
            "overloaded, or is embeddings.base_url wrong?"
        )
    if isinstance(exc, openai.APIConnectionError):
        if connection_refused(exc):
            return (
                f"cannot reach the embeddings endpoint {url}: connection refused, nothing "
                "listens there. Start the server (Ollama: `ollama serve`) or fix "
                "embeddings.base_url (inside Docker, 127.0.0.1 is the container itself: use "
                "the host's address)"
            )
        return (
            f"cannot reach the embeddings endpoint {url} ({root_cause(exc)}): check "
            "embeddings.base_url and the network"
        )
    if isinstance(exc, openai.AuthenticationError):
        if api_key(config, llm) is None:
            return (
                f"{url} wants an API key (401): set embeddings.api_key in config.toml "
                '(api_key = "${OPENAI_API_KEY}" reads it from the environment)'
            )
        if config.api_key is None:
            return (
                f"{url} refused the API key (401): embeddings.api_key is not set, so llm.api_key "
                "was used (the same endpoint); set embeddings.api_key or check llm.api_key"
            )
        return f"{url} refused the API key (401): check embeddings.api_key"
    if isinstance(exc, openai.APIStatusError):
        return (
            f"{url} answered {exc.status_code} ({exc.message}): check embeddings.base_url "
            "and embeddings.model"
        )
    return f"the embeddings endpoint {url} failed ({exc}): check embeddings.base_url"


def _unusable(values: object, url: str, model: str) -> str | None:
    """What the embedder would skip (:func:`bot.services.vectors.unit` checks the same), named."""
    from bot.services.vectors import BadVector, unit  # numpy, loaded only once embeddings are on

    try:
        unit(values)
    except BadVector as exc:
        return (
            f"{url} answered one word with model {model!r} but not a usable embedding ({exc}): "
            "set embeddings.model to an embedding model, and use a server that answers "
            "encoding_format=float with a list of numbers"
        )
    return None


def _not_embeddings(url: str) -> str:
    return (
        f"{url} answered with something that is not an embedding: is embeddings.base_url the "
        "API's address (not a web page or a proxy's login)?"
    )

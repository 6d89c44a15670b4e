"""Is the LLM endpoint usable, and if not, exactly what to change: for setup, doctor and start.

A first run gets the endpoint wrong in a handful of ways, each of which used to show up only as
"my model is unreachable" at the first message: nothing listens on the port, the base URL lacks
``/v1``, the model name is not one the endpoint serves, the endpoint wants a key (401). The
check lists the endpoint's models where it can, then (optionally) makes one tiny chat call, and
turns the first thing that goes wrong into one line naming the setting and the fix. Keys are
never part of a message.
"""

from __future__ import annotations

import errno
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import openai

from bot.config.services import LLMConfig
from bot.services.llm import NO_KEY

CHECK_SECONDS = 10.0
BASE_URL, API_KEY, MODEL = "llm.base_url", "llm.api_key", "llm.model"
MODELS_SHOWN = 12
TEST_MESSAGE = [{"role": "user", "content": "Reply with the single word OK."}]
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


@dataclass(frozen=True)
class EndpointCheck:
    problem: str | None
    """One line naming what is wrong and the fix; None when the endpoint works."""
    models: tuple[str, ...] | None = None
    """What the endpoint lists, if it lists models."""
    setting: str | None = None
    """The setting to change (``llm.base_url``, ``llm.api_key``, ``llm.model``): what setup
    asks again."""


def is_local_endpoint(url: str) -> bool:
    """Loopback, a private or link-local address, or a host name that only a local network
    knows (``localhost``, ``ollama`` in a compose file, ``*.local``): such endpoints (Ollama,
    vLLM, LM Studio) need no API key."""
    host = urlsplit(url).hostname
    if not host:
        return False
    if host == "localhost" or host.endswith(LOCAL_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host
    return address.is_loopback or address.is_private or address.is_link_local


async def check_endpoint(
    config: LLMConfig, *, call: bool = True, wait_seconds: float = CHECK_SECONDS
) -> EndpointCheck:
    """List the models, check the configured one is there, and (``call``) make one tiny
    chat call with it."""
    url = config.base_url.rstrip("/")
    listed = await list_models(config, wait_seconds)
    if listed.problem is not None:
        return listed
    models = listed.models
    if models is not None and (missing := _missing_model(config.model, models, url)):
        return EndpointCheck(missing, models, MODEL)
    if not call:
        return listed
    async with _client(config, url, wait_seconds) as client:
        problem, setting = await _call_problem(client, config, url, wait_seconds)
    return EndpointCheck(problem, models, setting)


async def list_models(config: LLMConfig, wait_seconds: float = CHECK_SECONDS) -> EndpointCheck:
    """Whether the endpoint answers at all (its address, its key), and the models it lists
    (None when it has no list). The model setting is not looked at: setup asks for it after
    the address is known to work."""
    url = config.base_url.rstrip("/")
    async with _client(config, url, wait_seconds) as client:
        try:
            return EndpointCheck(None, await _list_models(client))
        except openai.NotFoundError:
            if not url.endswith("/v1") and await _answers_at(config, f"{url}/v1", wait_seconds):
                return EndpointCheck(
                    f"{url} has no OpenAI-compatible API, but {url}/v1 has: set "
                    f'llm.base_url = "{url}/v1" in config.toml',
                    setting=BASE_URL,
                )
            return EndpointCheck(None)  # an endpoint without a model list: the call will tell
        except openai.APIError as exc:
            problem, setting = _problem(exc, config, url, wait_seconds)
            return EndpointCheck(problem, setting=setting)


async def check_model(config: LLMConfig, model: str) -> EndpointCheck:
    """Whether the endpoint serves ``model`` (a partner's own, beside ``llm.model``): a
    problem for ``llm.model`` when its list lacks it, for another setting when the endpoint
    could not be asked; no problem and no models when it keeps no list."""
    listed = await list_models(config)
    if listed.problem is not None or listed.models is None or is_served(model, listed.models):
        return listed
    url = config.base_url.rstrip("/")
    return EndpointCheck(
        f'model "{model}" is not served by {url}; served: {shown_models(listed.models)}',
        listed.models,
        MODEL,
    )


def is_served(model: str, models: Sequence[str]) -> bool:
    # Ollama lists "llama3.2:latest" and serves it as "llama3.2" too
    return model in models or f"{model}:latest" in models


def shown_models(models: Sequence[str]) -> str:
    """The first models of a list, for one line."""
    if not models:
        return "none"
    return ", ".join(models[:MODELS_SHOWN]) + (", …" if len(models) > MODELS_SHOWN else "")


def _client(config: LLMConfig, url: str, wait_seconds: float) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=url,
        api_key=config.api_key.get_secret_value() if config.api_key else NO_KEY,
        timeout=wait_seconds,
        max_retries=0,
    )


async def _list_models(client: openai.AsyncOpenAI) -> tuple[str, ...] | None:
    """The model ids, or None when the answer is not a model list (some proxies)."""
    try:
        page = await client.models.list()
        return tuple(str(model.id) for model in page.data)
    except (AttributeError, TypeError, json.JSONDecodeError):
        return None


async def _answers_at(config: LLMConfig, url: str, wait_seconds: float) -> bool:
    """Whether an OpenAI-compatible API answers at ``url`` (a 401 counts: it is there)."""
    async with _client(config, url, wait_seconds) as client:
        try:
            await client.models.list()
        except openai.AuthenticationError:
            return True
        except (openai.APIError, json.JSONDecodeError):
            return False
    return True


def _missing_model(model: str, models: Sequence[str], url: str) -> str | None:
    if is_served(model, models):
        return None
    if not models:
        return (
            f"{url} serves no models yet: add one (Ollama: `ollama pull {model}`), or set "
            "llm.model to a model it has"
        )
    return (
        f"model {model!r} is not served by {url}; it has: {shown_models(models)}. Set "
        f"llm.model to one of them (or, for Ollama, `ollama pull {model}`)"
    )


async def _call_problem(
    client: openai.AsyncOpenAI, config: LLMConfig, url: str, wait_seconds: float
) -> tuple[str | None, str | None]:
    """What one tiny chat call says is wrong, and the setting to change."""
    try:
        response = await client.chat.completions.create(
            model=config.model,
            messages=TEST_MESSAGE,  # type: ignore[arg-type]
        )
    except openai.NotFoundError as exc:
        if "model" in f"{exc.code} {exc.message}".lower():
            return (
                f"model {config.model!r} is not served by {url}: set llm.model to a model it has",
                MODEL,
            )
        return (
            f"{url}/chat/completions does not exist (404): is llm.base_url the API's address? "
            "OpenAI-compatible ones usually end in /v1",
            BASE_URL,
        )
    except openai.BadRequestError as exc:
        return (
            f"{url} refused a one-line test request with model {config.model!r} "
            f"(400: {exc.message}); check llm.model",
            MODEL,
        )
    except openai.APIError as exc:
        return _problem(exc, config, url, wait_seconds)
    except json.JSONDecodeError:
        return _not_a_completion(url), BASE_URL
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        return _not_a_completion(url), BASE_URL
    return None, None


def _not_a_completion(url: str) -> str:
    return (
        f"{url} answered with something that is not a chat completion: is llm.base_url the "
        "API's address (not a web page or a proxy's login)?"
    )


def _problem(
    exc: openai.APIError, config: LLMConfig, url: str, wait_seconds: float
) -> tuple[str, str]:
    """One line for the errors listing and calling have in common, and the setting to fix."""
    if isinstance(exc, openai.AuthenticationError):
        return _key_problem(config, url), API_KEY
    if isinstance(exc, openai.APITimeoutError):
        problem = (
            f"the LLM endpoint {url} did not answer within {wait_seconds:g} s: is it "
            "overloaded, or is llm.base_url wrong?"
        )
    elif isinstance(exc, openai.APIConnectionError):
        problem = _connection_problem(exc, url)
    elif isinstance(exc, openai.APIStatusError):
        problem = (
            f"{url} answered {exc.status_code} ({exc.message}): check llm.base_url and llm.model"
        )
    else:
        problem = f"the LLM endpoint {url} failed ({exc}): check llm.base_url"
    return problem, BASE_URL


def _connection_problem(exc: openai.APIConnectionError, url: str) -> str:
    if connection_refused(exc):
        return (
            f"cannot reach the LLM endpoint {url}: connection refused, nothing listens "
            "there. Start the server (Ollama: `ollama serve`) or fix llm.base_url (inside "
            "Docker, 127.0.0.1 is the container itself: use the host's address)"
        )
    return (
        f"cannot reach the LLM endpoint {url} ({root_cause(exc)}): check llm.base_url "
        "and the network"
    )


def _key_problem(config: LLMConfig, url: str) -> str:
    if config.api_key is None:
        return (
            f"{url} wants an API key (401): set llm.api_key in config.toml "
            '(api_key = "${OPENAI_API_KEY}" reads it from the environment) or export '
            "OPENAI_API_KEY"
        )
    return (
        f"{url} refused the API key (401): check llm.api_key (or OPENAI_API_KEY, which "
        "it falls back to)"
    )


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def connection_refused(exc: BaseException) -> bool:
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return True
        if isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED:
            return True
        if "refused" in str(cause).lower():
            return True
    return False


def root_cause(exc: BaseException) -> str:
    text = str(_causes(exc)[-1]) or type(_causes(exc)[-1]).__name__
    return text.splitlines()[0] if text else "no answer"

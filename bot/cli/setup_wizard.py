"""``companion setup``: from nothing to a config.toml that works, checked live.

Interactive (no setting given on the command line): it asks for the LLM endpoint (listing the
models it serves, then one tiny call; a wrong answer is explained and asked again), an optional
Telegram token (checked with getMe: the bot's @username) and Discord token (checked: the
invite URL), the owner — an id if you know it, else a one-time claim code printed at the
end — and whether to turn on the owner's web page. Answers come from stdin line by line, so
a script may pipe them.

Non-interactive (``--llm-base-url … --model … --telegram-token-env …``, for scripts and
Docker): the flags are applied to the file's current values and checked the same way; if a
check fails nothing is written and the command exits 2, each problem on one line.

Either way the file is edited in place with its comments kept (``bot/config/file.py``), and
values the owner did not touch stay as they were. Tokens and keys may be given as ``$NAME``,
written as ``"${NAME}"`` so the secret stays in the environment.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from adapters.base import TokenCheck
from bot.cli.invocation import command, program
from bot.cli.terminal import announce, ask, ask_secret, confirm, say
from bot.config.file import ConfigFile
from bot.config.model import Config, ConfigError, parse_config
from bot.gateway.access import OwnerCheck
from bot.gateway.claims import OwnerClaims, claim_notice
from bot.services.llm_check import (
    API_KEY,
    BASE_URL,
    MODEL,
    EndpointCheck,
    check_endpoint,
    is_local_endpoint,
    list_models,
)
from bot.store.opening import open_store

TokenCheckers = Mapping[str, Callable[[Config], Awaitable[TokenCheck]]]
PLATFORMS = {"telegram": "Telegram", "discord": "Discord"}
DEFAULT_LLM_URL = "http://127.0.0.1:11434/v1"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_HINT = "paste it, or $NAME to read the environment variable NAME"
NO_ANSWERS = (
    "setup stopped: it needs answers on stdin. To set up without questions pass the settings, "
    "e.g. {program} setup --llm-base-url URL --model NAME --telegram-token-env VAR "
    "({program} setup --help lists them)"
)


class SetupError(Exception):
    """Setup cannot finish; the message says why and what to do."""


@dataclass(frozen=True)
class SetupOptions:
    """The command line's settings; with none given, setup asks."""

    llm_base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    telegram_token_env: str | None = None
    telegram_base_url: str | None = None
    discord_token_env: str | None = None
    telegram_owner: int | None = None
    discord_owner: int | None = None
    data_dir: str | None = None
    web: bool | None = None
    check: bool = True

    @property
    def interactive(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self) if f.name != "check")


@dataclass
class Wizard:
    file: ConfigFile
    options: SetupOptions
    checkers: TokenCheckers
    literal_secret: bool = False
    bot_usernames: dict[str, str] = field(default_factory=dict)

    # ---- the document as it would be written --------------------------------------------

    def config(self) -> Config:
        return parse_config(self.file.text(), self.file.path)

    def set_secret(self, section: str, key: str, answer: str) -> None:
        """``$NAME`` becomes a reference to the environment; anything else is the secret."""
        if answer.startswith("$"):
            self.file.set(section, key, env_reference(answer.lstrip("$").strip("{}")))
        else:
            self.file.set(section, key, answer)
            self.literal_secret = True

    # ---- non-interactive ----------------------------------------------------------------

    async def apply_options(self) -> None:
        o = self.options
        for section, key, value in (
            ("storage", "data_dir", o.data_dir),
            ("llm", "base_url", o.llm_base_url),
            ("llm", "model", o.model),
            ("telegram", "base_url", o.telegram_base_url),
        ):
            if value is not None:
                self.file.set(section, key, value)
        for section, name in (
            ("llm", o.api_key_env),
            ("telegram", o.telegram_token_env),
            ("discord", o.discord_token_env),
        ):
            if name is not None:
                self.file.set(
                    section, "api_key" if section == "llm" else "token", env_reference(name)
                )
        for platform, user_id in (("telegram", o.telegram_owner), ("discord", o.discord_owner)):
            if user_id is not None:
                self.add_owner(platform, user_id)
        if o.web is not None:
            self.file.set("web", "enabled", o.web)
        config = self.config()
        if o.check:
            problems = await self.check_all(config)
            if problems:
                raise SetupError("\n".join([*problems, f"nothing written to {self.file.path}"]))

    async def check_all(self, config: Config) -> list[str]:
        problems = []
        if (problem := await self.llm_problem(config)) is not None:
            problems.append(problem)
        for platform in self.enabled(config):
            result = await self.check_token(platform, config)
            if result.problem is not None:
                problems.append(result.problem)
        return problems

    # ---- interactive --------------------------------------------------------------------

    def check_loads(self) -> None:
        """The questions cannot mend everything (a variable that is not set, an unknown
        key): a file that does not load is named before anything is asked."""
        if not self.file.existed:
            return
        try:
            self.config()
        except ConfigError as exc:
            raise SetupError(f"{exc}; fix that first (setup keeps the rest of the file)") from None

    async def interview(self) -> None:
        say(f"Setting up {self.file.path}. Enter keeps the value in [brackets].")
        await self.ask_llm()
        for platform in PLATFORMS:
            await self.ask_token(platform)
        await self.ask_owners()
        self.ask_web()
        self.ask_recall()

    async def ask_llm(self) -> None:
        """The endpoint first (its address, and its key where one is wanted), checked by
        listing its models before the model is asked; then the model, checked with one tiny
        call. A failed check asks again for exactly the answer it names."""
        models = await self.ask_endpoint()
        while True:
            self.file.set("llm", "model", need(ask("Model", self.default_model(models))))
            result = await self.endpoint_check(call=True)
            if result.problem is None:
                url, model = self.file.get("llm", "base_url"), self.file.get("llm", "model")
                say(f"  ok: {url} answers with model {model}")
                return
            say(f"  problem: {result.problem}")
            if result.setting != MODEL:
                models = await self.ask_endpoint(result.setting)

    async def ask_endpoint(self, failed: str | None = None) -> tuple[str, ...]:
        """Ask until the endpoint answers; the models it lists. After a refused key only
        the key is asked again."""
        while True:
            if failed != API_KEY:
                url = need(ask("LLM endpoint (OpenAI-compatible base URL)", self.current_url()))
                if not url.startswith(("http://", "https://")):
                    say(f"  problem: {url!r} is not a URL; it starts with http:// or https://")
                    continue
                self.file.set("llm", "base_url", url)
            if failed == API_KEY or not is_local_endpoint(self.current_url()):
                self.ask_key()
            listed = await self.endpoint_check(call=False)
            if listed.problem is None:
                if listed.models:
                    say(f"  it serves: {', '.join(listed.models[:20])}")
                return listed.models or ()
            say(f"  problem: {listed.problem}")
            failed = listed.setting

    def ask_key(self) -> None:
        keep = "Enter keeps the one set" if self.file.get("llm", "api_key") else "Enter: none"
        key = need(ask_secret(f"API key for {self.current_url()}: {SECRET_HINT}; {keep}"))
        if key:
            self.set_secret("llm", "api_key", key)

    def default_model(self, models: tuple[str, ...]) -> str | None:
        current = self.file.get("llm", "model")
        if models and current not in models and f"{current}:latest" not in models:
            return models[0]
        return str(current) if current else None

    def current_url(self) -> str:
        current = self.file.get("llm", "base_url")
        return str(current) if current else DEFAULT_LLM_URL

    async def endpoint_check(self, call: bool) -> EndpointCheck:
        """The endpoint as the file now stands: listed only, or (``call``) the model too."""
        if not self.options.check:
            return EndpointCheck(None)
        try:
            llm = self.config().llm
        except ConfigError as exc:
            return EndpointCheck(str(exc), setting=API_KEY if "api_key" in str(exc) else BASE_URL)
        if call:
            return await check_endpoint(llm)
        return await list_models(llm)

    async def llm_problem(self, config: Config) -> str | None:
        if not self.options.check:
            return None
        result = await check_endpoint(config.llm)
        return result.problem

    async def ask_token(self, platform: str) -> None:
        label = PLATFORMS[platform]
        while True:
            previous = self.file.get(platform, "token")
            keep = "Enter keeps the one set" if previous else "Enter skips"
            answer = need(ask_secret(f"{label} bot token: {SECRET_HINT}; {keep}"))
            if not answer:
                return
            self.set_secret(platform, "token", answer)
            try:
                result = await self.check_token(platform, self.config())
            except ConfigError as exc:
                result = TokenCheck(str(exc))
            if result.problem is None:
                return
            say(f"  problem: {result.problem}")
            if previous is None:
                self.file.remove(platform, "token")
            else:
                self.file.set(platform, "token", previous)

    async def ask_owners(self) -> None:
        config = self.config()
        for platform in self.enabled(config):
            if owner_ids(config, platform):
                continue
            label = PLATFORMS[platform]
            question = (
                f"Your own {label} user id, if you know it (Enter: claim the bot with a code)"
            )
            while not (answer := need(ask(question))).isdigit() and answer:
                say(f"  problem: {answer!r} is not a {label} user id (digits only)")
            if answer:
                self.add_owner(platform, int(answer))

    def ask_web(self) -> None:
        """The owner's web page (docs/web.md); the end of input leaves it as it
        is, so scripts written before the question existed still finish."""
        if self.file.get("web", "enabled"):
            return
        answer = confirm(
            "Turn on the web page for you (on 127.0.0.1; /admin web sends you a login link)?"
        )
        if answer:
            self.file.set("web", "enabled", True)
            where = (
                "your direct chat with the bot" if self.enabled(self.config()) else "the console"
            )
            say(f"  ok: send /admin web in {where} once it runs")

    def ask_recall(self) -> None:
        """Semantic recall with the local embedder, offered only when its extra is installed
        and no [embeddings] is set yet (docs/local-embeddings.md)."""
        from bot.services.local_embeddings import installed

        if not installed() or self.config().embeddings.enabled:
            return
        if confirm("Find past messages by meaning too, with the local embedder (no server)?"):
            self.file.set("embeddings", "provider", "local")
            say(f"  ok: `{command('reindex')}` embeds the history kept so far at once")

    # ---- shared -------------------------------------------------------------------------

    def enabled(self, config: Config) -> list[str]:
        tokens = {"telegram": config.telegram.token, "discord": config.discord.token}
        return [platform for platform, token in tokens.items() if token is not None]

    async def check_token(self, platform: str, config: Config) -> TokenCheck:
        if not self.options.check:
            return TokenCheck(None)
        result = await self.checkers[platform](config)
        if result.problem is None:
            say(f"  ok: {PLATFORMS[platform]} knows this bot as {result.identity}")
            if result.username:
                self.bot_usernames[platform] = result.username
        for note in result.notes:
            say(f"  {note}")
        return result

    def add_owner(self, platform: str, user_id: int) -> None:
        key = f"{platform}_ids"
        current = list(self.file.get("owner", key) or [])
        if user_id not in current:
            self.file.set("owner", key, [*current, user_id])

    async def offer_claims(self) -> None:
        """A claim code for each enabled platform that still has no owner."""
        config = self.config()
        store = await open_store(config.database)
        try:
            claimed = {row["user_key"] for row in await store.claimed_owners()}
            configured = {f"{p}:{i}" for p in PLATFORMS for i in owner_ids(config, p)}
            claims = OwnerClaims(store, OwnerCheck(claimed | configured))
            for platform in self.enabled(config):
                if claims.unclaimed(platform):
                    code = await claims.issue(platform)
                    announce(*claim_notice(platform, code, self.bot_usernames.get(platform)))
        finally:
            await store.close()


def owner_ids(config: Config, platform: str) -> list[int]:
    return {"telegram": config.owner.telegram_ids, "discord": config.owner.discord_ids}.get(
        platform, []
    )


def env_reference(name: str) -> str:
    if not ENV_NAME.match(name):
        raise SetupError(
            f"{name!r} is not an environment variable name (letters, digits and _, e.g. "
            "TELEGRAM_BOT_TOKEN)"
        )
    return "${" + name + "}"


def need(answer: Any) -> Any:
    """An answer, or stop: the end of input means nobody is there to answer."""
    if answer is None:
        raise SetupError(NO_ANSWERS.format(program=program()))
    return answer


async def run_setup(
    path: Path,
    options: SetupOptions,
    checkers: TokenCheckers,
    named: str | None = None,
    *,
    then_run: bool = False,
) -> None:
    """Ask (or take the options), check, write the file, then offer claim codes. ``named``
    is the ``--config`` given, which the commands it suggests name again. ``then_run``: the
    gateway starts right after (``run`` without a config), and prints its own claim codes."""
    wizard = Wizard(ConfigFile(path), options, checkers)
    if options.interactive:
        wizard.check_loads()
        await wizard.interview()
    else:
        await wizard.apply_options()
    wizard.file.save(private=wizard.literal_secret)
    say(
        f"wrote {path}"
        + (" (readable by you only: it holds a secret)" if wizard.literal_secret else "")
    )
    if then_run:
        say(f"Starting the gateway now; next time, `{command('run', named)}` starts it.")
        return
    await wizard.offer_claims()
    say(
        f"Next: `{command('run', named)}` starts the gateway; `{command('doctor', named)}` "
        "checks everything again."
    )

"""Every command the documentation prints works as printed: README.md and docs/*.md, each
line of a shell block and each `code` span that is a command.

- ``companion …`` (also ``.venv/bin/companion …`` and what ``docker compose run``/``exec`` or
  ``docker exec`` hands the image's ``companion``): the real argument parser accepts it. A
  usage line (``[optional]``, ``a|b``, ``ID`` or ``<id>`` for a value) is tried in each form.
- ``docker compose …``: the service and profile it names are in compose.yaml.
- ``make TARGET [VAR=value]``: the Makefile has the target and reads the variable.
- ``/admin …`` and ``/name …``: a command there is, with arguments its usage takes (a word
  such as ``on`` or ``pause`` only where the usage names it). ``/claim`` and BotFather's own
  commands are named too; anything else that starts with a slash must be a path below.

Other programs (``pipx``, ``ollama``, ``chown``…) are left alone.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.admin.table import ADMIN
from bot.cli.main import build_parser
from bot.commands.table import COMMANDS
from bot.gateway.claims import CLAIM_COMMANDS
from tests.compose_file import load_compose

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")

BOTFATHER = {"newbot", "setprivacy"}
"""Commands sent to Telegram's @BotFather, not to our bot."""
PATHS = {"/v1", "/data"}
"""Code spans that start with a slash and are paths, not commands (besides those with a second
slash, such as ``/config/config.toml``)."""
FREE_TEXT = {"text", "question", "query"}
"""A usage slot by one of these names takes the rest of the line."""
FENCE = re.compile(r"^\s*```(\w*)")
PLACEHOLDER = re.compile(r"^(<[^>]+>|[A-Z][A-Z0-9_]*(\.[a-z]+)?|YYYY-MM-DD|Area/City)$")
"""A word the reader replaces: ``<id>``, ``ID``, ``FILE.jsonl``, ``YYYY-MM-DD``."""


@dataclass(frozen=True)
class Printed:
    where: str
    text: str
    in_prose: bool = False
    """A code span in a sentence, where a command may be named without its arguments."""

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def printed() -> Iterator[Printed]:
    """Each command line of a shell block (comments and continuations resolved; in a block
    of reference lines, what follows two spaces is its description) and each code span."""
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        prose: list[tuple[int, str]] = []
        block: str | None = None
        pending = ""
        for number, line in enumerate(lines, 1):
            fence = FENCE.match(line)
            if fence:
                block = fence.group(1) if block is None else None
                continue
            if block is None:
                prose.append((number, line))
                continue
            text = re.sub(r"\s+#.*$", "", line).strip()
            if block == "sh" and text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            text, pending = pending + text, ""
            text = re.split(r"\s{2,}", text)[0]
            command = block == "sh" or re.match(r"companion |/", text) and block in ("", "text")
            if text and command:
                yield Printed(f"{name}:{number}", text)
        yield from spans(name, prose)


def spans(name: str, prose: list[tuple[int, str]]) -> Iterator[Printed]:
    """Code spans of the text outside blocks; a span may run over a line break."""
    text = "\n".join(line for _, line in prose)
    for match in re.finditer(r"`([^`]+)`", text):
        line = prose[text.count("\n", 0, match.start())][0]
        yield Printed(f"{name}:{line}", " ".join(match.group(1).split()), in_prose=True)


def forms(words: list[str]) -> list[list[str]]:
    """The forms a usage line stands for: with its optional parts and without, and each
    alternative of ``a|b`` (the i-th form takes each word's i-th alternative, or its last).
    An optional lowercase word (``[partner]``) is a value to give, as ``<partner>``."""
    found: list[list[str]] = []
    for with_optional in (True, False):
        kept: list[str] = []
        depth = 0
        for word in words:
            opens, closes = word.count("["), word.count("]")
            bare = word.replace("[", "").replace("]", "")
            optional = depth > 0 or opens > 0
            depth += opens - closes
            if optional and not with_optional or bare in ("", "...", "…"):
                continue
            kept.append(f"<{bare}>" if optional and re.fullmatch(r"[a-z_]+", bare) else bare)
        choices = [word.split("|") for word in kept]
        for index in range(max((len(c) for c in choices), default=1)):
            form = [c[min(index, len(c) - 1)] for c in choices]
            if form not in found:
                found.append(form)
    return found


def words_of(text: str) -> list[str]:
    return shlex.split(text.replace("\\|", "|"))


# ---- companion ----------------------------------------------------------------------------


def companion_arguments(words: list[str]) -> list[str] | None:
    """The arguments the ``companion`` program gets from a printed command (None: it runs
    no ``companion``)."""
    if words[:1] in (["companion"], [".venv/bin/companion"]):
        return words[1:]
    if words[:2] == ["docker", "compose"]:
        verb, rest = compose_verb(words[2:])
        service, rest = after_options(rest)
        if verb == "run":
            return rest  # the image's entrypoint is companion
        if verb == "exec" and rest[:1] == ["companion"]:
            return rest[1:]
    if words[:2] == ["docker", "exec"]:
        _, rest = after_options(words[2:])
        if rest[:1] == ["companion"]:
            return rest[1:]
    return None


VALUED_OPTIONS = {"--profile", "--index", "--scale", "--name", "--restart", "-e", "-v", "-t"}


def compose_verb(words: list[str]) -> tuple[str, list[str]]:
    _, rest = after_options(words)
    return (rest[0], rest[1:]) if rest else ("", [])


def after_options(words: list[str]) -> tuple[str | None, list[str]]:
    """The first word that is no option (nor an option's value), and the words after it."""
    index = 0
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in VALUED_OPTIONS else 1
    return (words[index], words[index + 1 :]) if index < len(words) else (None, [])


def parses(arguments: list[str]) -> str | None:
    """None if ``companion ARGUMENTS`` parses, else what argparse said."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(arguments)
        except SystemExit as stopped:
            if stopped.code not in (0, None):
                return err.getvalue().strip().splitlines()[-1]
    return None


def fill(form: list[str]) -> list[str]:
    """A value in place of each placeholder (``1`` parses as an id, a number or a name)."""
    return ["1" if PLACEHOLDER.match(word) else word for word in form]


COMPANION_LINES = [
    (p, args) for p in printed() if (args := companion_arguments(words_of(p.text))) is not None
]


def test_the_documentation_prints_companion_commands_to_check() -> None:
    commands = {args[0] for _, args in COMPANION_LINES if args}
    assert {"setup", "run", "chat", "doctor", "pairing", "partners", "import"} <= commands


@pytest.mark.parametrize(("where", "arguments"), COMPANION_LINES, ids=str)
def test_every_printed_companion_command_parses(where: Printed, arguments: list[str]) -> None:
    if all(word in ("...", "…") for word in arguments):
        return  # the program alone, named in a sentence
    if where.in_prose and all(re.fullmatch(r"[a-z]+", word) for word in arguments):
        # a (sub)command named in a sentence, its arguments left out: it must exist
        assert parses([*arguments, "--help"]) is None, f"{where}: no such command"
        return
    for form in forms(arguments):
        problem = parses(fill(form))
        assert problem is None, f"{where}\n  companion {' '.join(form)}\n  {problem}"


# ---- docker compose -----------------------------------------------------------------------

COMPOSE_LINES = [p for p in printed() if p.text.startswith("docker compose ")]


@pytest.mark.parametrize("where", COMPOSE_LINES, ids=str)
def test_every_printed_compose_command_names_a_service_and_profile_there_is(
    where: Printed,
) -> None:
    compose = load_compose()
    services = compose["services"]
    profiles = {p for s in services.values() for p in s.get("profiles", [])}
    words = words_of(where.text)[2:]
    named = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--profile"]
    assert set(named) <= profiles, f"{where}: no such profile"
    verb, rest = compose_verb(words)
    service, _ = after_options(rest)
    if verb in ("run", "exec", "logs", "up") and service is not None:
        assert service in services, f"{where}: no service {service!r} in compose.yaml"


# ---- make -----------------------------------------------------------------------------------

MAKE_LINES = [p for p in printed() if re.match(r"make [a-z]", p.text)]


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, re.MULTILINE))


@pytest.mark.parametrize("where", MAKE_LINES, ids=str)
def test_every_printed_make_command_is_a_target_with_the_variables_it_sets(
    where: Printed,
) -> None:
    target, *assignments = where.text.split()[1:]
    assert target in make_targets(), f"{where}: the Makefile has no target {target!r}"
    for assignment in assignments:
        variable = assignment.partition("=")[0]
        assert re.search(rf"\$\({variable}\)", MAKEFILE), f"{where}: make reads no {variable}"


# ---- chat commands --------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One place of a command's usage: required or not, any value or only ``words``, or the
    rest of the line."""

    required: bool
    words: frozenset[str]
    value: bool
    rest: bool = False


def slots(usage: str) -> list[list[Slot]]:
    """A usage's forms (``[id] | confirm <token>`` has two) as slots: ``<id> <key> <value>
    [--force]``, ``[pause|resume]``, ``<id>|all|history``, ``[key value]``. A lowercase word
    alone in brackets is a value (``[partner]``); words joined by ``|`` or starting with a
    dash are themselves."""
    found = []
    for form in usage.split(" | "):
        form_slots = []
        for word in re.findall(r"\[[^\]]*\]|\S+", form):
            required = not word.startswith("[")
            for part in word.strip("[]").split() or [""]:
                choices = part.split("|")
                if len(choices) == 1 and not required and re.fullmatch(r"[a-z_]+", part):
                    choices = [f"<{part}>"]
                named = {c.strip("<>") for c in choices if c.startswith("<")}
                literal = frozenset(c for c in choices if not c.startswith("<"))
                rest = bool(named & FREE_TEXT)
                form_slots.append(Slot(required, literal, bool(named), rest))
        found.append(form_slots)
    return found


def fits(arguments: list[str], usage: list[list[Slot]]) -> bool:
    """Whether the printed arguments fill one of the usage's forms."""
    return any(fits_form(arguments, form) for form in usage)


def fits_form(arguments: list[str], usage: list[Slot]) -> bool:
    """A placeholder fills a value slot; a word, a value slot or a slot naming it."""
    if not usage:
        return not arguments
    slot, later = usage[0], usage[1:]
    if not arguments:
        return not any(s.required for s in usage)
    word = arguments[0]
    placeholder = PLACEHOLDER.match(word) is not None
    takes = (slot.value and (slot.rest or not word.startswith("-"))) or (
        word in slot.words and not placeholder
    )
    if slot.rest and takes:
        return True  # the rest of the line
    if takes and fits_form(arguments[1:], later):
        return True
    return not slot.required and fits_form(arguments, later)


def admin_command(arguments: list[str]) -> tuple[str, list[str]] | None:
    """The /admin subcommand the arguments name (two words first), and its arguments."""
    two = " ".join(arguments[:2]).lower()
    if two in ADMIN:
        return two, arguments[2:]
    if arguments and arguments[0].lower() in ADMIN:
        return arguments[0].lower(), arguments[1:]
    return None


CHAT_LINES = [
    p
    for p in printed()
    if re.match(r"/[a-z]", p.text)
    and p.text.split()[0] not in PATHS
    and "/" not in p.text.split()[0][1:]
]


def test_the_documentation_prints_chat_commands_to_check() -> None:
    names = {p.text.split()[0] for p in CHAT_LINES}
    assert {"/admin", "/partner", "/forget", "/new", "/claim"} <= names


@pytest.mark.parametrize("where", CHAT_LINES, ids=str)
def test_every_printed_chat_command_is_one_there_is_with_arguments_it_takes(
    where: Printed,
) -> None:
    name, *arguments = words_of(where.text)
    name = name[1:]
    if arguments[:1] == ["command:"]:  # Discord's slash command names its option
        arguments = arguments[1:]
    if name in BOTFATHER:
        return
    if name in CLAIM_COMMANDS and name not in COMMANDS:
        if arguments or not where.in_prose:
            assert fits(arguments, slots("<code>")), f"{where}: /{name} takes the code alone"
        return
    assert name in COMMANDS, f"{where}: there is no /{name} (nor is it a known path)"
    if name != "admin":
        usage = COMMANDS[name].usage
        if where.in_prose and not arguments:
            return  # named in a sentence
        for form in forms(arguments):
            assert fits(form, slots(usage)), f"{where}: /{name} {usage} takes no {form}"
        return
    for form in forms(arguments):
        if form in ([], ["..."]):
            continue  # /admin alone lists the owner's commands
        found = admin_command(form)
        if found is None and where.in_prose and len(form) == 1:
            group = form[0] + " "  # `/admin partner`: the group, named
            assert any(sub.startswith(group) for sub in ADMIN), f"{where}: no /admin {form[0]}"
            continue
        assert found is not None, f"{where}: there is no /admin {form[0]}"
        sub, rest = found
        if where.in_prose and not rest:
            continue  # named in a sentence
        usage = ADMIN[sub].usage
        assert fits(rest, slots(usage)), f"{where}: /admin {sub} {usage} takes no {rest}"


def test_usage_slots_read_as_the_help_shows_them() -> None:
    """The reading the checks above rest on: a word where the usage names it, a value where
    it takes one, the rest of the line for free text."""
    assert fits(["pause"], slots("[pause|resume]"))
    assert not fits(["stop"], slots("[pause|resume]"))
    assert fits([], slots("[pause|resume]"))
    assert fits(["<id>"], slots("<id>|all|history")) and fits(["all"], slots("<id>|all|history"))
    assert not fits([], slots("<code>")) and not fits(["a", "b"], slots("<code>"))
    assert fits(["mira", "model", "x", "--force"], slots("<id> <key> <value> [--force]"))
    assert fits(["mira", "hi", "there", "you"], slots("<partner> <question>"))
    assert fits(["mira", "--card", "json"], slots("<id> --card [json]"))
    assert not fits(["mira", "json"], slots("<id> --card [json]"))
    assert fits(["review_turns", "5"], slots("[key value]"))
    assert fits(["<partner>", "<entry>"], slots("[partner] <entry>"))
    assert fits(["confirm", "abc"], slots("[id] | confirm <token>"))
    assert not fits(["<partner>"], slots("[pause|resume]"))
    assert list(itertools.chain(*forms(["approve|deny", "CODE"]))) == [
        "approve",
        "CODE",
        "deny",
        "CODE",
    ]

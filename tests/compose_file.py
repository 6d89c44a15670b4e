"""compose.yaml as Compose renders it, for tests on a machine without a Docker engine.

Compose replaces ``${VAR}``, ``${VAR:-default}`` (default when unset or empty) and
``${VAR-default}`` (default when unset) in every value with the variables of its shell and
``.env``, and ``$$`` with ``$``; those are the forms compose.yaml uses, and any other (``${VAR:?}``,
nested defaults) fails the rendering, so a test notices a form it does not render as Compose
would.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

COMPOSE_FILE = Path(__file__).parent.parent / "compose.yaml"
REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}$]*))?\}|\$\{[^}]*\}?")


def load_compose() -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe").load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return loaded


def render(value: Any, variables: Mapping[str, str]) -> Any:
    """``value`` (compose.yaml or a part of it) with every variable replaced."""
    if isinstance(value, dict):
        return {key: render(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, variables) for item in value]
    if isinstance(value, str):
        return REFERENCE.sub(lambda match: _substitute(match, variables), value)
    return value


def _substitute(match: re.Match[str], variables: Mapping[str, str]) -> str:
    if match.group(0) == "$$":
        return "$"
    name, operator, default = match.groups()
    if name is None:
        raise ValueError(f"{match.group(0)!r}: a form of variable this test does not render")
    value = variables.get(name)
    if operator == ":-" and not value:
        return default
    if operator == "-" and value is None:
        return default
    return value or ""


def rendered_compose(variables: Mapping[str, str]) -> dict[str, Any]:
    rendered: dict[str, Any] = render(load_compose(), variables)
    return rendered


def worker_environment(variables: Mapping[str, str]) -> dict[str, str]:
    """What a ``worker`` container's process sees: ``variables`` (its ``.env``, which Compose
    both interpolates with and passes in as ``env_file``) under the service's own
    ``environment``, which wins."""
    worker = rendered_compose(variables)["services"]["worker"]
    return {**variables, **{key: str(value) for key, value in worker["environment"].items()}}

"""What the image and a fresh machine install: the versions the tests passed with.

No Docker engine runs here, so the Dockerfile and compose.yaml are read, not built: the base
image pinned by digest, dependencies installed from the lock in a layer of their own before the
code is copied, and the compose service with its volumes, env file and healthcheck."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from ruamel.yaml import YAML

from bot.config.model import load_config
from tests.compose_file import load_compose, rendered_compose, worker_environment

ROOT = Path(__file__).parent.parent
LOCK = ROOT / "requirements.lock"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return canonical(match.group(0))


def locked() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins[canonical(name)] = version.strip()
    return pins


def test_the_lock_pins_every_declared_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    missing = {requirement_name(r) for r in declared} - locked().keys()
    assert missing == set(), "add them to requirements.lock (make lock)"


def test_the_installed_versions_are_the_locked_ones() -> None:
    """make installs with the lock as constraints: a drift means the lock no longer says what
    the tests ran with."""
    drift = {}
    for name, version in locked().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency of another platform or Python
        if installed != version:
            drift[name] = (version, installed)
    assert drift == {}


def test_the_image_starts_from_a_pinned_base_and_installs_dependencies_before_code() -> None:
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    [base] = [line for line in lines if line.startswith("FROM ")]
    assert re.fullmatch(r"FROM python:3\.11-slim@sha256:[0-9a-f]{64}", base)
    install_deps = next(i for i, line in enumerate(lines) if "-c requirements.lock" in line)
    first_code = next(i for i, line in enumerate(lines) if line.startswith("COPY bot"))
    copied_before = [line for line in lines[:install_deps] if line.startswith("COPY ")]
    assert install_deps < first_code
    assert copied_before == ["COPY pyproject.toml requirements.lock ./"]


def test_make_installs_with_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    installs = [line for line in makefile.splitlines() if "pip install" in line and "-e " in line]
    project_installs = [line for line in installs if "LOCK_VENV" not in line]
    assert project_installs and all("-c $(LOCK)" in line for line in project_installs)


def test_the_compose_service_has_its_volumes_env_file_and_healthcheck() -> None:
    compose = YAML(typ="safe").load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    service = compose["services"]["companion"]
    mounts = {volume.split(":")[1] for volume in service["volumes"]}
    assert {"/data", "/config"} <= mounts
    assert service["env_file"][0]["path"] == ".env"
    assert service["healthcheck"]["test"] == ["CMD", "companion", "health"]
    assert "profiles" not in service  # `docker compose up` alone runs the one gateway on SQLite


def test_every_named_volume_of_compose_is_declared_and_used() -> None:
    compose = YAML(typ="safe").load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    used = {
        volume.split(":")[0]
        for service in compose["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith(("/", "."))
    }
    assert set(compose["volumes"]) == used


def test_compose_scales_workers_on_one_postgresql() -> None:
    """`docker compose --profile workers up -d --scale worker=4 worker` (docs/workers.md): a worker
    can run in any number (no fixed name), and starts only once the
    database answers."""
    compose = load_compose()
    worker, database = compose["services"]["worker"], compose["services"]["postgres"]
    assert worker["profiles"] == database["profiles"] == ["workers"]
    assert "container_name" not in worker
    assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(database["healthcheck"]["test"])
    assert any(v.endswith(":/var/lib/postgresql/data") for v in database["volumes"])


def test_compose_renders_with_only_the_variable_forms_compose_substitutes() -> None:
    for variables in ({}, {"POSTGRES_PASSWORD": "pw", "WEB_HOST_PORT": "8780"}):
        text = repr(rendered_compose(variables))
        assert "${" not in text


def test_a_worker_has_no_config_volume_and_no_data_but_its_own() -> None:
    worker = rendered_compose({})["services"]["worker"]
    assert worker.get("volumes", []) == []  # /data is the image's anonymous volume
    assert "/data" in (ROOT / "Dockerfile").read_text(encoding="utf-8").split("VOLUME")[1]


def test_the_environment_compose_gives_a_worker_is_its_whole_config() -> None:
    """No file: COMPANION_CONFIG is empty, .env and the service's variables are read alone,
    the database URL holds the password from .env, and the service's values win."""
    dotenv = {
        "POSTGRES_PASSWORD": "s3cret",
        "COMPANION_LLM__MODEL": "llama3.2",
        "COMPANION_TELEGRAM__TOKEN": "123:abc",
        "COMPANION_WEB__LISTEN": "127.0.0.1",  # overridden: a container must listen outside
    }
    environment = worker_environment(dotenv)
    assert environment["COMPANION_CONFIG"] == ""
    config = load_config(None, environment)
    assert config.database == "postgresql://companion:s3cret@postgres:5432/companion"
    assert config.data_dir == Path("/data")
    assert config.llm.model == "llama3.2"
    assert config.web.listen == config.telegram.webhook_listen == "0.0.0.0"


def test_a_worker_publishes_the_web_page_on_the_hosts_loopback_by_default() -> None:
    """A free host port per worker (so --scale works) on 127.0.0.1, mapped to the port the
    web page listens on inside; the operator may fix the port or the address."""
    for variables, published in (
        ({}, "127.0.0.1::"),
        ({"WEB_HOST_PORT": "8780"}, "127.0.0.1:8780:"),
        ({"WEB_HOST_IP": "0.0.0.0", "WEB_HOST_PORT": "9000"}, "0.0.0.0:9000:"),
    ):
        worker = rendered_compose(variables)["services"]["worker"]
        port = load_config(None, worker_environment(variables)).web.port
        assert worker["ports"] == [f"{published}{port}"]


def test_optional_parts_cost_no_memory_until_they_are_turned_on() -> None:
    """numpy (semantic recall) and the web page's templates are loaded only when
    ``[embeddings]`` or ``[web]`` is set: a gateway without them stays small."""
    probe = (
        "import sys, bot.app, bot.cli.main, bot.turn.runner, partners.tools;"
        "print(' '.join(m for m in ('numpy', 'jinja2') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []

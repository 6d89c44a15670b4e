"""One revision's gateway in a process of its own, for bench/compare.py.

Started as ``python -P bench/compare_gateway.py SETTINGS_JSON`` with the revision's tree first
on PYTHONPATH, so the ``bot``, ``adapters`` and ``partners`` imported here are that tree's
(``-P``: this script's folder, bench/, is not put on the path). It builds the gateway the way
the revision's own Telegram benchmark does (``build_app(config, {"telegram": channel})``),
talking to the fake Bot API and the fake LLM the harness runs on 127.0.0.1, prints one JSON
line when it is serving (with the files its packages came from, so the harness can check that
the revision's tree won over the editable install), and stops when its stdin closes.

This file must keep working for every revision compared, the release 9f75571 included: it
imports nothing of this repository at module level and looks names up where each layout of
``bot/`` keeps them.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import sys
from typing import Any

WHERE = {
    "build_app": ("bot.app", "bot.app.build", "bot.composition"),
    "Config": ("bot.config", "bot.config.model", "bot.config.sections"),
    "TelegramChannel": ("adapters.telegram_channel", "adapters.telegram"),
}


def find(name: str) -> Any:
    """The first module of WHERE[name] that has ``name``; a clear error when none has."""
    tried = []
    for module_name in WHERE[name]:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            tried.append(f"{module_name} ({exc})")
            continue
        if hasattr(module, name):
            return getattr(module, name)
        tried.append(f"{module_name} (no {name})")
    raise SystemExit(f"compare_gateway: cannot find {name}; tried {', '.join(tried)}")


def settings_to_config(settings: dict[str, Any]) -> Any:
    config_class = find("Config")
    return config_class.model_validate(
        {
            "llm": {"base_url": settings["llm_url"], "api_key": "x", "max_retries": 0},
            "storage": {"data_dir": settings["data_dir"]},
            "owner": {"timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
            "telegram": {"token": settings["token"], "base_url": settings["telegram_url"]},
        }
    )


async def build(config: Any) -> Any:
    """The revision's app with a Telegram channel: handed in where build_app takes channels,
    built by the app itself where it constructs them from the config."""
    build_app = find("build_app")
    if len(inspect.signature(build_app).parameters) >= 2:
        channel = find("TelegramChannel")(config.telegram)
        return await build_app(config, {"telegram": channel})
    return await build_app(config)


def package_files() -> dict[str, str]:
    return {
        name: str(getattr(sys.modules[name], "__file__", ""))
        for name in ("bot", "adapters", "partners")
        if name in sys.modules
    }


async def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    app = await build(settings_to_config(json.loads(sys.argv[1])))
    await app.start()
    try:
        print(json.dumps({"ready": True, "files": package_files()}), flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the harness closes our stdin
    finally:
        await app.stop()


if __name__ == "__main__":
    asyncio.run(main())

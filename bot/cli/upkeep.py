"""``companion setup``, ``doctor``, ``health`` and ``backup``: writing config.toml, checking
an installation, telling a healthcheck whether the gateway is up, and archiving the data."""

from __future__ import annotations

import argparse
import asyncio
import functools
from pathlib import Path

from bot.app.channels import partner_bot_checker, token_checkers
from bot.cli.doctor import examine
from bot.cli.doctor_tokens import TokenChecker
from bot.cli.setup_wizard import SetupOptions, run_setup
from bot.config.model import Config, ConfigError, config_path
from bot.store.backup import write_backup
from bot.workers.health import check_health


def cmd_setup(args: argparse.Namespace) -> int:
    options = SetupOptions(
        llm_base_url=args.llm_base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        telegram_token_env=args.telegram_token_env,
        telegram_base_url=args.telegram_base_url,
        discord_token_env=args.discord_token_env,
        telegram_owner=args.telegram_owner,
        discord_owner=args.discord_owner,
        data_dir=args.data_dir,
        web=args.web,
        check=not args.no_check,
    )
    path = config_path(Path(args.config) if args.config else None)
    if path is None:
        raise ConfigError(
            "COMPANION_CONFIG is empty (settings from the environment only): name the file "
            "setup writes with --config FILE"
        )
    asyncio.run(run_setup(path, options, token_checkers(), args.config))
    return 0


def cmd_doctor(config: Config, args: argparse.Namespace) -> int:
    file = config_path(Path(args.config) if args.config else None)
    found = file if file is not None and file.exists() else None
    partner_bots = functools.partial(partner_bot_checker(), config)
    findings = asyncio.run(examine(config, found, token_checks(config), partner_bots))
    for finding in findings:
        print(finding.line())
    return 1 if any(finding.ok is False for finding in findings) else 0


def token_checks(config: Config) -> dict[str, TokenChecker]:
    """A live check for each chat token that is set."""
    tokens = {"telegram": config.telegram.token, "discord": config.discord.token}
    return {
        platform: functools.partial(check, config)
        for platform, check in token_checkers().items()
        if tokens[platform] is not None
    }


def cmd_health(config: Config, args: argparse.Namespace) -> int:
    """Read the status file ``companion run`` keeps fresh; never asks the LLM provider."""
    del args
    health = check_health(config.data_dir)
    print(health.summary)
    return 0 if health.healthy else 1


def cmd_backup(config: Config, args: argparse.Namespace) -> int:
    target = asyncio.run(
        write_backup(
            config.data_dir, Path(args.file) if args.file else None, database=config.database
        )
    )
    print(f"backup written to {target}")
    return 0

"""``[mcp]`` in config.toml and ``tools.mcp`` in preset.yml: what is refused, and how it is
said, without echoing a key the table holds; and a server's schema that cannot be sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.model import ConfigError, parse_config
from bot.services.mcp_listing import ListedTool
from bot.turn.mcp_tools import offered, schema_bytes
from partners.preset import PartnerError, parse_preset

FILE = Path("config.toml")


def refused(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, FILE, {})
    return str(caught.value)


def test_a_stdio_and_an_http_server_are_read_with_their_defaults() -> None:
    config = parse_config(
        '[mcp.servers.clock]\ncommand = "uvx"\nargs = ["mcp-server-time"]\n'
        '[mcp.servers.web]\nurl = "http://127.0.0.1:9000/mcp"\nowner_only = true\n'
        "[mcp.servers.web.tools.fetch]\nconfirm = true\n",
        FILE,
        {},
    ).mcp
    assert config.max_schema_bytes == 6000
    assert config.servers["clock"].args == ["mcp-server-time"]
    assert config.servers["web"].owner_only and config.servers["web"].tools["fetch"].confirm


def test_a_server_needs_exactly_one_of_command_and_url() -> None:
    message = refused("[mcp.servers.clock]\ntimeout_seconds = 3\n")
    assert "mcp.servers.clock.url" in message and "exactly one of them" in message
    both = refused('[mcp.servers.clock]\ncommand = "x"\nurl = "http://127.0.0.1/"\n')
    assert "exactly one of them" in both


def test_a_bad_server_name_is_named_with_the_rule() -> None:
    message = refused('[mcp.servers.My_Clock]\ncommand = "x"\n')
    assert "mcp.servers.My_Clock" in message and "lower-case letters" in message


def test_headers_on_a_command_are_refused_without_showing_them() -> None:
    message = refused(
        '[mcp.servers.mail]\ncommand = "x"\nheaders = {Authorization = "Bearer s3cret"}\n'
    )
    assert "headers are for an url server" in message and "s3cret" not in message


def test_a_server_table_with_env_keys_is_never_echoed() -> None:
    message = refused('[mcp.servers.mail]\nenv = {MAIL_PASSWORD = "s3cret"}\n')
    assert "s3cret" not in message


def test_preset_tools_mcp_takes_servers_and_server_tools() -> None:
    preset = parse_preset(b"tools:\n  mcp: [clock, web.fetch]\n", "preset.yml", "kai")
    assert preset.tools_mcp == ("clock", "web.fetch")


def test_preset_tools_mcp_refuses_what_names_no_server() -> None:
    with pytest.raises(PartnerError, match=r"tools\.mcp.*'Clock Now' is not a server"):
        parse_preset(b"tools:\n  mcp: [Clock Now]\n", "preset.yml", "kai")


def test_a_schema_that_cannot_be_sent_costs_more_than_any_cap() -> None:
    async def never(_ctx: object, _args: object) -> str:
        return ""

    deep: dict[str, object] = {"type": "object"}
    for _ in range(100_000):
        deep = {"type": "object", "properties": {"x": deep}}
    lone = {"type": "object", "description": "\ud800"}
    small = offered("s", ListedTool("t", "a tool", {"type": "object"}), never)  # type: ignore[arg-type]
    assert schema_bytes(small) < 200
    for parameters in (deep, lone):
        spec = offered("s", ListedTool("t", "x", parameters), never)  # type: ignore[arg-type]
        assert schema_bytes(spec) > 10**9

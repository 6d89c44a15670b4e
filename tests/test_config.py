"""Config loading: defaults, environment references, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Config, ConfigError, load_config, parse_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_config_file_means_defaults_and_env_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no config.toml here, and none named
    config = load_config(None, {"OPENAI_API_KEY": "sk-env"})
    assert config.llm.model == "gpt-4o-mini"
    assert config.llm.api_key is not None
    assert config.llm.api_key.get_secret_value() == "sk-env"
    assert config.memory.review_turns == 3


def test_environment_reference_is_expanded(tmp_path: Path) -> None:
    path = write(tmp_path, '[telegram]\ntoken = "${TG_TOKEN}"\n')
    config = load_config(path, {"TG_TOKEN": "123:abc"})
    assert config.telegram.token is not None
    assert config.telegram.token.get_secret_value() == "123:abc"


def test_missing_environment_variable_names_key_and_variable(tmp_path: Path) -> None:
    path = write(tmp_path, '[telegram]\ntoken = "${TG_TOKEN}"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    message = str(caught.value)
    assert "telegram.token" in message and "TG_TOKEN" in message and "export" in message


def test_wrong_type_names_the_key_path(tmp_path: Path) -> None:
    path = write(tmp_path, '[llm]\ntimeout = "soon"\n')
    with pytest.raises(ConfigError, match=r"llm\.timeout"):
        load_config(path, {})


def test_unknown_key_is_refused_with_its_path(tmp_path: Path) -> None:
    path = write(tmp_path, "[memory]\nreview_turn = 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "memory.review_turn" in str(caught.value)
    assert "unknown key" in str(caught.value)


def test_binding_errors_name_the_list_index(tmp_path: Path) -> None:
    path = write(tmp_path, '[[bindings]]\nplatform = "irc"\nchat_id = 1\npartner = "x"\n')
    with pytest.raises(ConfigError, match=r"bindings\.0\.platform"):
        load_config(path, {})


def test_bad_toml_syntax_is_one_clear_message(tmp_path: Path) -> None:
    path = write(tmp_path, "[llm\nmodel = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path, {})


def test_bad_secret_value_is_not_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "[discord]\ntoken = 12345678901234\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "12345678901234" not in str(caught.value)
    assert "discord.token" in str(caught.value)


def test_an_empty_token_is_named_not_passed_to_the_platform(tmp_path: Path) -> None:
    path = write(tmp_path, '[telegram]\ntoken = ""\n[discord]\ntoken = " "\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert "telegram.token: Value error, is empty" in str(caught.value)
    assert "discord.token: Value error, is empty" in str(caught.value)


def test_unknown_timezone_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[owner]\ntimezone = "Mars/Olympus"\n')
    with pytest.raises(ConfigError, match=r"owner\.timezone"):
        load_config(path, {})


def test_example_config_is_valid() -> None:
    example = Path(__file__).parent.parent / "config.example.toml"
    config = load_config(example, {"OPENAI_API_KEY": "sk-x"})
    assert config.access.dm_policy == "pairing"
    assert config.dispatch.max_concurrent_turns == 64


def test_companion_config_naming_a_missing_file_stops_with_the_variable_named(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "config" / "config.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"COMPANION_CONFIG": str(missing)})
    message = str(caught.value)
    assert str(missing) in message and "COMPANION_CONFIG" in message
    assert "companion setup" in message


def test_a_directory_where_the_config_file_should_be_is_named_with_the_fix(
    tmp_path: Path,
) -> None:
    mounted = tmp_path / "config.toml"
    mounted.mkdir()
    for explicit, environ in ((mounted, {}), (None, {"COMPANION_CONFIG": str(mounted)})):
        with pytest.raises(ConfigError) as caught:
            load_config(explicit, environ)
        message = str(caught.value)
        assert "is a directory" in message and str(mounted) in message
        assert "\n" not in message


def test_the_example_config_needs_no_openai_key_for_a_local_endpoint() -> None:
    """Copied as it is and pointed at Ollama, it must not ask for a key Ollama does not need."""
    example = Path(__file__).parent.parent / "config.example.toml"
    text = example.read_text(encoding="utf-8").replace(
        'base_url = "https://api.openai.com/v1"', 'base_url = "http://127.0.0.1:11434/v1"'
    )
    local = parse_config(text, example, {})
    assert local.llm.api_key is None
    hosted = parse_config(text, example, {"OPENAI_API_KEY": "sk-env"})
    assert hosted.llm.api_key is not None and hosted.llm.api_key.get_secret_value() == "sk-env"


def test_delivery_pauses_that_shrink_are_refused_with_the_key_named(tmp_path: Path) -> None:
    path = write(tmp_path, "[delivery]\nfirst_pause_seconds = 60\nmax_pause_seconds = 5\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    message = str(caught.value)
    assert "delivery.max_pause_seconds" in message
    assert "at least first_pause_seconds (60)" in message


def test_delivery_retry_time_must_be_positive(tmp_path: Path) -> None:
    path = write(tmp_path, "[delivery]\nretry_minutes = 0\n")
    with pytest.raises(ConfigError, match="delivery.retry_minutes"):
        load_config(path, {})


def test_a_database_url_may_come_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, '[storage]\ndatabase_url = "${DATABASE_URL}"\n')
    url = "postgresql://bot:hunter2@127.0.0.1:5432/companion"
    config = load_config(path, {"DATABASE_URL": url})
    assert config.database == url
    assert "hunter2" not in repr(config.storage)


def test_without_a_database_url_the_database_is_sqlites_file_in_the_data_dir(
    tmp_path: Path,
) -> None:
    config = load_config(write(tmp_path, f'[storage]\ndata_dir = "{tmp_path}"\n'), {})
    assert config.database == tmp_path / "gateway.db"


def test_a_database_url_that_is_not_postgresql_is_refused_without_echoing_it(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[storage]\ndatabase_url = "mysql://bot:hunter2@db/companion"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    message = str(caught.value)
    assert "storage.database_url" in message and "postgresql://" in message
    assert "hunter2" not in message


# ---- Discord shards per worker --------------------------------------------------------


def discord_shards(tmp_path: Path, lines: str, environ: dict[str, str] | None = None) -> Config:
    return load_config(write(tmp_path, f"[discord]\n{lines}\n"), environ or {})


def test_without_shard_ids_a_worker_connects_every_shard(tmp_path: Path) -> None:
    config = discord_shards(tmp_path, "shards = 4")
    assert config.discord.shards == 4
    assert config.discord.shard_ids is None


@pytest.mark.parametrize(
    ("written", "ids"),
    [
        ("[1, 3]", [1, 3]),
        ('"0-3"', [0, 1, 2, 3]),
        ('"2"', [2]),
        ('"0-1, 3"', [0, 1, 3]),
        ("2", [2]),
    ],
)
def test_shard_ids_are_a_list_or_ranges_in_a_string(
    tmp_path: Path, written: str, ids: list[int]
) -> None:
    config = discord_shards(tmp_path, f"shards = 4\nshard_ids = {written}")
    assert config.discord.shard_ids == ids


def test_each_worker_may_get_its_shard_ids_from_the_environment(tmp_path: Path) -> None:
    lines = 'shards = "${DISCORD_SHARDS}"\nshard_ids = "${DISCORD_SHARD_IDS}"'
    config = discord_shards(tmp_path, lines, {"DISCORD_SHARDS": "4", "DISCORD_SHARD_IDS": "2-3"})
    assert (config.discord.shards, config.discord.shard_ids) == (4, [2, 3])


def test_shard_ids_outside_the_count_are_refused_with_the_valid_range(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        discord_shards(tmp_path, 'shards = 2\nshard_ids = "1-2"')
    message = str(caught.value)
    assert "discord.shard_ids" in message
    assert "2 is not a shard of discord.shards = 2 (0 to 1)" in message


@pytest.mark.parametrize("count", ["", 'shards = "auto"'])
def test_shard_ids_without_a_shard_count_are_refused(tmp_path: Path, count: str) -> None:
    with pytest.raises(ConfigError) as caught:
        discord_shards(tmp_path, f"{count}\nshard_ids = [0]")
    message = str(caught.value)
    assert "discord.shard_ids" in message
    assert "set discord.shards to the total number of shards" in message


def test_a_shard_named_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        discord_shards(tmp_path, 'shards = 4\nshard_ids = "0-2, 1"')
    assert "discord.shard_ids: Value error, shard 1 is named twice" in str(caught.value)


@pytest.mark.parametrize("written", ['"one"', '"3-1"', '""', "[]", '"0-"'])
def test_unreadable_shard_ids_say_how_to_write_them(tmp_path: Path, written: str) -> None:
    with pytest.raises(ConfigError) as caught:
        discord_shards(tmp_path, f"shards = 4\nshard_ids = {written}")
    message = str(caught.value)
    assert "discord.shard_ids" in message
    assert 'a list like [0, 1] or ranges like "0-3" or "0-1,4"' in message


def test_a_mistyped_huge_shard_range_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="names more shards than any bot has"):
        discord_shards(tmp_path, 'shards = 4\nshard_ids = "0-99999999999"')


def test_a_shard_count_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"discord\.shards: .*at least 1"):
        discord_shards(tmp_path, "shards = 0")

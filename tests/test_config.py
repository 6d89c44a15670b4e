"""Config loading: defaults, environment references, and errors that name the key."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.config import machine_zone
from bot.config.model import Config, ConfigError, config_path, load_config, parse_config


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


def test_a_secret_a_command_does_not_use_may_be_unset_in_its_shell(tmp_path: Path) -> None:
    """`companion pairing list` in a new shell: the bot's token lives in the gateway's shell
    only; the command reads no token, so its unset variable leaves the key unset. A variable
    the command needs still stops it, naming the key."""
    path = write(
        tmp_path,
        '[llm]\napi_key = "${LLM_KEY}"\n[telegram]\ntoken = "${TG_TOKEN}"\n'
        '[telegram.bots]\nsol = "${SOL_TOKEN}"\n',
    )
    config = load_config(path, {}, unneeded=("telegram.token", "telegram.bots", "llm.api_key"))
    assert config.telegram.token is None and config.telegram.bots == {}
    assert config.llm.api_key is None
    with pytest.raises(ConfigError, match="llm.api_key refers to the environment variable LLM_KEY"):
        load_config(path, {}, unneeded=("telegram.token", "telegram.bots"))
    set_here = load_config(path, {"TG_TOKEN": "123:abc", "LLM_KEY": "k"}, unneeded=("telegram",))
    assert set_here.telegram.token is not None  # set in this shell: used as it is


@pytest.mark.parametrize(
    ("command", "runs"), [(["pairing", "list"], True), (["chat"], True), (["run"], False)]
)
def test_commands_that_use_no_bot_token_run_without_its_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    runs: bool,
) -> None:
    monkeypatch.delenv("TG_TOKEN_NOT_EXPORTED", raising=False)
    path = write(
        tmp_path,
        f'[llm]\nbase_url = "http://127.0.0.1:9/v1"\n[storage]\ndata_dir = "{tmp_path}"\n'
        '[telegram]\ntoken = "${TG_TOKEN_NOT_EXPORTED}"\n',
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    main(["--config", str(path), *command])
    err = capsys.readouterr().err
    assert ("TG_TOKEN_NOT_EXPORTED" not in err) is runs, err


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


# ---- every key from the environment: COMPANION_<SECTION>__<KEY> ----------------------


def from_environment(environ: dict[str, str], text: str = "") -> Config:
    """The config of ``text`` (no file at all when empty) with ``environ`` around it."""
    return parse_config(text, Path("config.toml"), environ)


def test_a_text_key_takes_the_variable_as_it_is() -> None:
    config = from_environment({"COMPANION_LLM__MODEL": "4", "COMPANION_OWNER__TIMEZONE": "UTC"})
    assert config.llm.model == "4"  # a model named "4" stays text, not the number 4
    assert config.owner.timezone == "UTC"


def test_numbers_from_the_environment_are_numbers() -> None:
    config = from_environment(
        {"COMPANION_LLM__TIMEOUT": "12.5", "COMPANION_DISPATCH__MAX_CONCURRENT_TURNS": "8"}
    )
    assert config.llm.timeout == 12.5
    assert config.dispatch.max_concurrent_turns == 8


def test_booleans_from_the_environment_are_booleans() -> None:
    config = from_environment({"COMPANION_WEB__ENABLED": "true", "COMPANION_LLM__VISION": "false"})
    assert config.web.enabled is True
    assert config.llm.vision is False


def test_arrays_from_the_environment_are_lists() -> None:
    config = from_environment(
        {
            "COMPANION_OWNER__TELEGRAM_IDS": "[1, 2]",
            "COMPANION_ACCESS__ALLOW": '["telegram:5", "discord:6"]',
        }
    )
    assert config.owner.telegram_ids == [1, 2]
    assert config.access.allow == ["telegram:5", "discord:6"]


def test_a_secret_from_the_environment_stays_secret() -> None:
    url = "postgresql://bot:hunter2@127.0.0.1:5432/companion"
    config = from_environment(
        {"COMPANION_TELEGRAM__TOKEN": "123:abc", "COMPANION_STORAGE__DATABASE_URL": url}
    )
    assert config.telegram.token is not None
    assert config.telegram.token.get_secret_value() == "123:abc"
    assert config.database == url
    assert "123:abc" not in repr(config) and "hunter2" not in repr(config)


def test_a_key_that_takes_a_word_or_a_number_reads_either() -> None:
    counted = from_environment(
        {"COMPANION_DISCORD__SHARDS": "4", "COMPANION_DISCORD__SHARD_IDS": "2-3"}
    )
    assert (counted.discord.shards, counted.discord.shard_ids) == (4, [2, 3])
    asked = from_environment({"COMPANION_DISCORD__SHARDS": "auto"})
    assert asked.discord.shards == "auto"


def test_a_list_of_tables_is_one_variable_holding_the_whole_list() -> None:
    bindings = '[{platform = "telegram", chat_id = -100, partner = "luna"}]'
    config = from_environment({"COMPANION_BINDINGS": bindings})
    [binding] = config.bindings
    assert (binding.platform, binding.chat_id, binding.partner) == ("telegram", "-100", "luna")


def test_the_environment_wins_over_the_file_key_by_key() -> None:
    text = '[llm]\nmodel = "from-file"\nbase_url = "http://127.0.0.1:11434/v1"\n'
    config = from_environment({"COMPANION_LLM__MODEL": "from-env"}, text)
    assert config.llm.model == "from-env"
    assert config.llm.base_url == "http://127.0.0.1:11434/v1"  # the rest of [llm] is kept


def test_an_api_key_from_its_variable_wins_over_openai_api_key_and_the_file() -> None:
    environ = {"COMPANION_LLM__API_KEY": "sk-worker", "OPENAI_API_KEY": "sk-shell"}
    for text in ("", '[llm]\napi_key = "sk-file"\n'):
        config = from_environment(environ, text)
        assert config.llm.api_key is not None
        assert config.llm.api_key.get_secret_value() == "sk-worker"


def test_an_empty_variable_counts_as_unset() -> None:
    config = from_environment({"COMPANION_LLM__MODEL": ""}, '[llm]\nmodel = "from-file"\n')
    assert config.llm.model == "from-file"
    assert config.from_environment == {}


def test_the_config_says_which_keys_came_from_the_environment() -> None:
    config = from_environment(
        {"COMPANION_LLM__MODEL": "m", "COMPANION_WEB__LISTEN": "0.0.0.0", "OPENAI_API_KEY": "sk"},
        '[llm]\nbase_url = "https://api.openai.com/v1"\n',
    )
    assert config.from_environment == {
        "llm.model": "COMPANION_LLM__MODEL",
        "web.listen": "COMPANION_WEB__LISTEN",
        "llm.api_key": "OPENAI_API_KEY",
    }


def test_an_unknown_key_in_the_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        from_environment({"COMPANION_LLM__MODLE": "gpt"})
    message = str(caught.value)
    assert "\n" not in message
    assert "COMPANION_LLM__MODLE" in message and "llm.modle" in message
    assert "unknown key" in message and "COMPANION_<SECTION>__<KEY>" in message


def test_a_single_underscore_after_the_section_is_an_unknown_key() -> None:
    """COMPANION_LLM_MODEL would otherwise be ignored while the model stays the default."""
    with pytest.raises(ConfigError) as caught:
        from_environment({"COMPANION_LLM_MODEL": "gpt"})
    message = str(caught.value)
    assert "COMPANION_LLM_MODEL" in message and "unknown key" in message


def test_a_wrong_type_in_the_environment_names_the_variable_and_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        from_environment({"COMPANION_LLM__TIMEOUT": "soon"})
    message = str(caught.value)
    assert "\n" not in message
    assert "COMPANION_LLM__TIMEOUT" in message and "llm.timeout" in message
    assert "'soon'" in message


def test_a_bad_secret_in_the_environment_is_named_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        from_environment({"COMPANION_STORAGE__DATABASE_URL": "mysql://bot:hunter2@db/companion"})
    message = str(caught.value)
    assert "COMPANION_STORAGE__DATABASE_URL" in message and "postgresql://" in message
    assert "hunter2" not in message


def test_a_key_inside_a_list_of_tables_cannot_be_set_alone() -> None:
    text = '[[bindings]]\nplatform = "telegram"\nchat_id = 1\npartner = "luna"\n'
    with pytest.raises(ConfigError) as caught:
        from_environment({"COMPANION_BINDINGS__PARTNER": "mira"}, text)
    message = str(caught.value)
    assert "COMPANION_BINDINGS__PARTNER" in message and "COMPANION_BINDINGS" in message


def test_the_environment_alone_configures_a_worker_without_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COMPANION_CONFIG set but empty: no file, not even a config.toml where it runs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.toml").write_text('[llm]\nmodel = "from-a-stray-file"\n', "utf-8")
    config = load_config(
        None,
        {
            "COMPANION_CONFIG": "",
            "COMPANION_LLM__BASE_URL": "http://127.0.0.1:11434/v1",
            "COMPANION_LLM__MODEL": "llama3.2",
            "COMPANION_TELEGRAM__TOKEN": "123:abc",
            "COMPANION_STORAGE__DATABASE_URL": "postgresql://bot:pw@db:5432/companion",
        },
    )
    assert (config.llm.base_url, config.llm.model) == ("http://127.0.0.1:11434/v1", "llama3.2")
    assert config.telegram.token is not None
    assert config.database == "postgresql://bot:pw@db:5432/companion"


def test_an_empty_companion_config_names_no_file() -> None:
    assert config_path(None, {"COMPANION_CONFIG": ""}) is None
    assert config_path(None, {"COMPANION_CONFIG": "/config/config.toml"}) == Path(
        "/config/config.toml"
    )


def test_setup_with_an_empty_companion_config_asks_for_the_file_to_write(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COMPANION_CONFIG", "")
    assert main(["setup", "--no-check"]) == 2
    message = capsys.readouterr().err
    assert "COMPANION_CONFIG is empty" in message and "--config FILE" in message


def test_without_a_file_a_problem_no_variable_set_says_there_is_no_file() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"COMPANION_CONFIG": "", "COMPANION_TELEGRAM__MODE": "webhook"})
    assert str(caught.value).startswith("(no config file): telegram.webhook_url: ")


def test_the_machine_zone_serves_an_owner_without_one_and_a_change_counts_within_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/Europe/Lisbon")
    now = [1000.0]
    monkeypatch.setattr(machine_zone, "LOCALTIME", link)
    monkeypatch.setattr(machine_zone, "clock", lambda: now[0])
    monkeypatch.setattr(machine_zone, "_read_at", None)
    config = Config.model_validate({})
    assert str(config.owner_timezone()) == "Europe/Lisbon"
    link.unlink()
    link.symlink_to("/usr/share/zoneinfo/Asia/Tokyo")
    now[0] += machine_zone.MACHINE_ZONE_SECONDS - 1
    assert str(config.owner_timezone()) == "Europe/Lisbon"  # not read again on every turn
    now[0] += 1
    assert str(config.owner_timezone()) == "Asia/Tokyo"
    assert config.usage_day(0) == "1970-01-01"
    assert Config.model_validate({"owner": {"timezone": "UTC"}}).owner_timezone().key == "UTC"

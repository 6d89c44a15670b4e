"""An MCP tool call's arguments and result belong to the conversation that made them: stored
with it, in that user's /export, gone after their /forget history, never in another user's
prompt or a group's. Run on each store backend."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest

from tests.conftest import Harness, HarnessFactory, dm, group_message
from tests.fakes.fake_llm import Reply
from tests.test_forgetting import new_secret, traces
from tests.test_mcp_tools import call, fake_server, gateway, tool_results, turn

USER, OTHER = 42, 43


@pytest.fixture
async def harness(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory
) -> Harness:
    async def factory(**sections: Any) -> Harness:
        storage = {**storage_on_each_backend, "documents": "files"}  # the preset is edited
        harness: Harness = await harness_factory(storage=storage, **sections)
        return harness

    return await gateway(factory, {"fake": fake_server()}, "{mcp: [fake]}")


async def echoed(harness: Harness, secret: str) -> None:
    """The user's partner sends ``secret`` to a tool; the user's own words never hold it."""
    requests = await turn(
        harness, dm(USER, "check it for me"), call("fake__echo", text=secret), Reply("done")
    )
    assert tool_results(requests[1])[0].endswith(secret)


async def test_a_call_is_kept_with_the_conversation_and_exported_to_its_user(
    harness: Harness,
) -> None:
    secret = new_secret()
    await echoed(harness, secret)
    [kept] = await harness.app.store.user_tool_calls("example", f"test:{USER}")
    assert (kept.server, kept.tool, kept.chat_key) == ("fake", "echo", f"test:{USER}")
    assert json.loads(kept.arguments) == {"text": secret} and kept.result == secret
    assert await harness.app.store.user_tool_calls("example", f"test:{OTHER}") == []
    await turn(harness, dm(USER, "/export"))
    _, _, data, _ = harness.channel.files[-1]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        exported = json.loads(archive.read("export.json"))
    [exported_call] = exported["tool_calls"]
    assert exported_call["tool"] == "fake.echo" and exported_call["result"] == secret


async def test_another_user_and_a_group_never_see_a_call(harness: Harness) -> None:
    secret = new_secret()
    await echoed(harness, secret)
    other = await turn(harness, dm(OTHER, "what did the others ask?", name="Bob"), Reply("?"))
    assert secret not in json.dumps(other)
    await harness.app.store.bind("test", "g1", "example", "all")
    group = await turn(harness, group_message("g1", OTHER, "hello all", name="Bob"), Reply("hi"))
    assert group and secret not in json.dumps(group)


async def test_forget_history_removes_a_calls_arguments_and_result(harness: Harness) -> None:
    secret = new_secret()
    await echoed(harness, secret)
    before = len(harness.channel.sent)
    await harness.send(dm(USER, "/forget history confirm"))
    await harness.settle()
    assert "messages" in harness.channel.sent[before].text
    assert await harness.app.store.user_tool_calls("example", f"test:{USER}") == []
    if harness.config.storage.database_url is None:  # SQLite: no byte of it left in any file
        assert await traces(harness, secret) == []

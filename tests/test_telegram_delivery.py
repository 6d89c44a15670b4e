"""Telegram delivery and faults, end to end on the real python-telegram-bot: formatting and
its plain-text fallback, long replies, streaming, flood waits, duplicate updates, a crash and
restart, webhooks and the polling watchdog."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from bot.events import ChatRef, Outbound
from bot.store import MessageRow
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import TOKEN, Call, FakeTelegram, utf16_len
from tests.telegram_harness import (
    BOT_USERNAME,
    GROUP,
    OWNER,
    Gateway,
    TelegramGateways,
    free_port,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

ALICE = 501
BOB = 502
CAROL = 503


def mention(fake: FakeTelegram, words: str, **kwargs: Any) -> dict[str, Any]:
    text = f"@{BOT_USERNAME} {words}"
    return fake.send_user_message(
        chat_id=GROUP,
        chat_type="supergroup",
        text=text,
        entities=fake.mention_entity(text),
        **kwargs,
    )


# ---- formatting and length -------------------------------------------------------------


async def test_rejected_formatting_is_resent_as_plain_text(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake.reject_entities_once()
    fake_llm.script(Reply(text="Try **this** and `that`"))
    fake.send_user_message(chat_id=ALICE, text="any tips?")
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert "parse_mode" not in reply.params
    assert reply.text == "Try this and that"
    refused = [c for c in fake.calls if c.method == "sendMessage" and c.status == 400]
    assert len(refused) == 1 and refused[0].params["parse_mode"] == "HTML"


async def test_a_long_reply_is_split_without_breaking_its_code_block(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    code = "\n".join(f"value_{i} = compute({i}) + {i} * 2  # step {i}" for i in range(220))
    prose = " ".join(f"This is sentence {i} of the explanation." for i in range(130))
    fake_llm.script(Reply(text=f"{prose}\n\n```python\n{code}\n```\n\n{prose}"))
    fake.send_user_message(chat_id=ALICE, text="show me the code")
    await fake.wait_for_call(lambda c: c.method == "sendMessage" and "step 219" in (c.text or ""))
    await settled(fake, gateways.running[0])
    chunks = fake.sent("sendMessage", ALICE)
    assert len(chunks) >= 3
    for chunk in chunks:
        shown = str(chunk.result["text"])
        assert utf16_len(shown) <= 4096
        opened = (chunk.text or "").count('<pre><code class="language-python">')
        assert opened == (chunk.text or "").count("</code></pre>")
    shown_code = re.findall(
        r"value_\d+ = compute\(\d+\) \+ \d+ \* 2  # step \d+",
        "".join(str(c.result["text"]) for c in chunks),
    )
    assert shown_code == code.split("\n")  # every line whole, in order, once
    assert all(not str(c.result["text"]).endswith("sentence") for c in chunks)


# ---- streaming -------------------------------------------------------------------------


async def test_dm_reply_streams_as_a_draft_then_arrives_as_a_message(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(telegram={"stream": True})
    answer = "Once upon a time there was a very patient teapot. " * 4
    fake_llm.script(Reply(text=answer))
    fake.send_user_message(chat_id=ALICE, text="tell me a story")
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    drafts = fake.sent("sendMessageDraft", ALICE)
    assert drafts and all(d.params["draft_id"] != 0 for d in drafts)
    assert str(drafts[0].text) in answer
    assert reply.text == answer.strip()
    assert fake_llm.requests[0].get("stream") is True


async def test_group_reply_streams_into_one_message_with_paced_edits(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(telegram={"stream": True})
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    answer = "Here is a **long** answer that arrives in pieces, " * 6
    fake_llm.script(Reply(text=answer))
    started = asyncio.get_running_loop().time()
    update = mention(fake, "explain please")
    [preview] = await fake.wait_for_sent(chat_id=GROUP)
    message_id = preview.result["message_id"]
    await fake.wait_until(
        lambda: "<b>long</b>" in str([c.text for c in fake.sent("editMessageText", GROUP)]),
        description="the finished message",
    )
    await settled(fake, gateway)
    elapsed = asyncio.get_running_loop().time() - started
    assert len(fake.sent("sendMessage", GROUP)) == 1  # the preview became the reply
    assert preview.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    edits = fake.sent("editMessageText", GROUP)
    assert 1 <= len(edits) <= 2 + elapsed / 3  # at most one edit per 3 s, plus the last
    assert fake.get_message(GROUP, message_id)["text"] == answer.strip().replace("**", "")


# ---- faults ----------------------------------------------------------------------------


async def test_flood_wait_is_honoured_and_the_reply_still_arrives(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake.fail_next("sendMessage", status=429, retry_after=1)
    fake_llm.script(Reply(text="Worth the wait"))
    fake.send_user_message(chat_id=ALICE, text="hello?")
    [reply] = await fake.wait_for_sent(chat_id=ALICE, timeout=10)
    assert reply.text == "Worth the wait"
    attempts = [c for c in fake.calls if c.method == "sendMessage" and c.chat_id == ALICE]
    assert [c.status for c in attempts] == [429, 200]
    assert attempts[1].time - attempts[0].time >= 0.9  # waited as told


# ---- platform outages (docs/architecture.md "Decisions": nothing stays pending forever) ----------

FAST_RETRIES = {"retry_minutes": 1, "first_pause_seconds": 0.05, "max_pause_seconds": 0.2}
"""Pauses of tenths of a second instead of seconds to minutes, so a test outage is short."""
OLD_TRIES = 6
"""How often a reply used to be tried before it was dropped for good."""


def sends_to(fake: FakeTelegram, chat_id: int) -> list[Call]:
    """Every sendMessage call to a chat, refused or not."""
    return [c for c in fake.calls if c.method == "sendMessage" and c.chat_id == chat_id]


async def replies_to(gateway: Gateway, user_id: int) -> list[MessageRow]:
    rows = await gateway.app.store.user_messages("example", f"telegram:{user_id}")
    return [row for row in rows if row.role != "user"]


async def test_a_reply_refused_through_an_outage_arrives_once_when_it_ends(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(delivery=FAST_RETRIES)
    outage = 2 * OLD_TRIES
    fake.fail_next("sendMessage", status=502, count=outage)
    fake_llm.script(Reply(text="Still here"))
    fake.send_user_message(chat_id=ALICE, text="hello?")
    [reply] = await fake.wait_for_sent(chat_id=ALICE, timeout=30)
    assert reply.text == "Still here"
    await settled(fake, gateway)
    assert [c.status for c in sends_to(fake, ALICE)] == [502] * outage + [200]
    [row] = await replies_to(gateway, ALICE)
    assert row.status == "delivered"
    assert await gateway.app.store.delivery_retry(row.id) is None
    assert fake.sent("sendMessage", OWNER) == []
    assert len(fake_llm.requests) == 1


async def test_a_reply_refused_until_a_restart_is_sent_by_the_next_process(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    first = await gateways.start(delivery=FAST_RETRIES)
    fake.failing_chats[ALICE] = 502
    fake_llm.script(Reply(text="Made it"))
    fake.send_user_message(chat_id=ALICE, text="are you there?")
    await fake.wait_until(lambda: len(sends_to(fake, ALICE)) >= 3, timeout=10)
    await first.app.stop()
    gateways.running.remove(first)
    refused_before_restart = len(sends_to(fake, ALICE))

    second = await gateways.start(delivery=FAST_RETRIES)
    await fake.wait_until(lambda: len(sends_to(fake, ALICE)) > refused_before_restart, timeout=10)
    del fake.failing_chats[ALICE]  # the outage ends
    [reply] = await fake.wait_for_sent(chat_id=ALICE, timeout=10)
    assert reply.text == "Made it"
    await settled(fake, second)
    assert [c.status for c in sends_to(fake, ALICE)][-1:] == [200]
    assert len(fake.sent("sendMessage", ALICE)) == 1
    assert len(fake_llm.requests) == 1  # delivered, not answered again


async def test_a_reply_still_refused_when_its_time_is_up_is_reported_to_the_owner(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """The time counts from the first refusal, and a restart does not reset it."""
    short = {**FAST_RETRIES, "retry_minutes": 0.05}  # 3 s
    first = await gateways.start(delivery=short)
    fake.failing_chats[ALICE] = 502
    fake_llm.script(Reply(text="Never seen"))
    fake.send_user_message(chat_id=ALICE, text="hello?")
    await fake.wait_until(lambda: len(sends_to(fake, ALICE)) >= 2, timeout=10)
    await first.app.stop()
    gateways.running.remove(first)

    second = await gateways.start(delivery=short)
    [notice] = await fake.wait_for_sent(chat_id=OWNER, timeout=20)
    assert f"telegram chat {ALICE}" in (notice.text or "")
    assert "could not be delivered" in (notice.text or "")
    refused = sends_to(fake, ALICE)
    assert {c.status for c in refused} == {502}
    [audit] = await second.app.store.audit_rows("reply_undeliverable")
    assert audit["detail"]["attempts"] == len(refused)  # both processes' tries, counted on
    assert "Bad Gateway" in audit["detail"]["error"]
    [row] = await replies_to(second, ALICE)
    assert row.status == "undeliverable"

    del fake.failing_chats[ALICE]  # the platform is back: a given-up reply stays given up
    await settled(fake, second)
    assert fake.sent("sendMessage", ALICE) == []


async def test_a_reply_held_back_by_an_outage_goes_out_before_the_next_one(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """The user writes again once the outage is over: the held-back reply is not left to its
    next scheduled try (half a minute away here) but sent first, in order."""
    await gateways.start(delivery={"first_pause_seconds": 30, "max_pause_seconds": 30})
    fake.failing_chats[ALICE] = 502
    fake_llm.script(Reply(text="first answer"), Reply(text="second answer"))
    fake.send_user_message(chat_id=ALICE, text="first")
    await fake.wait_until(lambda: len(sends_to(fake, ALICE)) == 1, timeout=10)
    del fake.failing_chats[ALICE]
    fake.send_user_message(chat_id=ALICE, text="second")
    sent = await fake.wait_for_sent(chat_id=ALICE, count=2, timeout=10)
    assert [call.text for call in sent] == ["first answer", "second answer"]


async def test_a_reply_the_platform_refuses_for_good_is_not_tried_again(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(delivery=FAST_RETRIES)
    fake.blocked_chats.add(ALICE)
    fake_llm.script(Reply(text="You blocked me"))
    fake.send_user_message(chat_id=ALICE, text="bye")
    [notice] = await fake.wait_for_sent(chat_id=OWNER, timeout=10)
    assert "blocked" in (notice.text or "")
    await settled(fake, gateway)
    assert [c.status for c in sends_to(fake, ALICE)] == [403]
    [audit] = await gateway.app.store.audit_rows("reply_undeliverable")
    assert audit["detail"]["attempts"] == 1
    [row] = await replies_to(gateway, ALICE)
    assert row.status == "undeliverable"


async def test_an_update_delivered_twice_gets_one_reply(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    await fake.wait_for_pending_polls()
    fake.stalled = True  # hold the poll so both copies arrive in one batch
    update = fake.message_update(chat_id=ALICE, text="only once please", update_id=77)
    fake.push_update(dict(update))
    fake.push_update(dict(update))
    fake.stalled = False
    await fake.wait_for_sent(chat_id=ALICE)
    await settled(fake, gateway)
    assert fake.delivered_update_ids.count(77) == 2
    assert len(fake.sent("sendMessage", ALICE)) == 1


async def test_an_update_that_cannot_be_parsed_is_rejected_and_its_batch_goes_on(
    gateways: TelegramGateways,
    fake: FakeTelegram,
    fake_llm: FakeLLM,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway = await gateways.start()
    fake_llm.responder = lambda request: Reply(text=f"re: {fake_llm.last_user_text(request)}")
    await fake.wait_for_pending_polls()
    fake.stalled = True  # hold the poll so all three arrive in one batch
    fake.push_update(fake.message_update(chat_id=ALICE, text="before the bad one"))
    malformed = fake.message_update(chat_id=CAROL, text="bold news")
    # a shape this python-telegram-bot cannot parse (an entity without offset and length)
    malformed["message"]["entities"] = [{"type": "bold"}]
    bad_id = fake.push_update(malformed)
    last_id = fake.push_update(fake.message_update(chat_id=BOB, text="after the bad one"))
    fake.stalled = False

    [before] = await fake.wait_for_sent(chat_id=ALICE, timeout=10)
    [after] = await fake.wait_for_sent(chat_id=BOB, timeout=10)
    assert (before.text or "").endswith("before the bad one")
    assert (after.text or "").endswith("after the bad one")
    confirming = await fake.wait_for_call(
        lambda c: c.method == "getUpdates" and (c.params.get("offset") or 0) > last_id,
        include_pending=True,
    )
    assert confirming.params["offset"] == last_id + 1
    assert fake.pending_updates == []
    assert await gateway.app.store.rejected_updates("telegram") == [str(bad_id)]
    await settled(fake, gateway)
    assert fake.sent("sendMessage", CAROL) == []
    assert len(fake_llm.requests) == 2
    assert f"update {bad_id} not understood" in caplog.text
    assert TOKEN not in caplog.text


async def test_a_crash_before_answering_gives_exactly_one_reply_after_restart(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()

    async def hold(request: dict[str, Any]) -> Reply:
        del request
        await release.wait()
        return Reply(text="too late")

    fake_llm.responder = hold
    first = await gateways.start()
    update = fake.send_user_message(chat_id=ALICE, text="are you there?")
    await fake_llm.wait_for_requests(1)  # stored, and the turn is under way
    await first.crash()
    gateways.running.remove(first)
    release.set()
    fake.push_update(dict(update))  # Telegram delivers it again after the crash

    fake_llm.responder = None
    fake_llm.script(Reply(text="Yes, I'm here"))
    second = await gateways.start()
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.text == "Yes, I'm here"
    await settled(fake, second)
    assert len(fake.sent("sendMessage", ALICE)) == 1


async def test_workers_without_a_configured_secret_expect_the_same_webhook_secret(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    # behind one load balancer every worker must accept what the last one registered
    registered = []
    for _ in range(2):
        port = free_port()
        await gateways.start(
            telegram={
                "mode": "webhook",
                "webhook_port": port,
                "webhook_url": f"http://127.0.0.1:{port}/telegram",
            }
        )
        assert fake.webhook is not None
        registered.append(str(fake.webhook["secret_token"]))
        await gateways.stop_all()
    assert registered[0] == registered[1] and len(registered[0]) >= 32
    assert TOKEN.split(":")[-1] not in registered[0]


async def test_webhook_takes_updates_with_the_right_secret_only(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    port = free_port()
    await gateways.start(
        telegram={
            "mode": "webhook",
            "webhook_port": port,
            "webhook_url": f"http://127.0.0.1:{port}/telegram",
            "webhook_secret": "s3cret-token",
        }
    )
    assert fake.webhook is not None and fake.webhook["secret_token"] == "s3cret-token"
    assert not any(c.method == "getUpdates" for c in fake.calls)

    wrong = await fake.post_webhook(fake.message_update(chat_id=666, text="hi"), secret="nope")
    missing = await fake.post_webhook(fake.message_update(chat_id=666, text="hi"), secret=None)
    assert (wrong, missing) == (403, 403)

    fake_llm.script(Reply(text="Hello via webhook"))
    status = await fake.post_webhook(fake.message_update(chat_id=ALICE, text="hi"))
    assert status == 200
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.text == "Hello via webhook"
    assert fake.sent("sendMessage", 666) == [] and len(fake_llm.requests) == 1


async def test_webhook_answers_only_after_the_update_is_stored(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()

    async def hold(request: dict[str, Any]) -> Reply:
        del request
        await release.wait()
        return Reply(text="done")

    fake_llm.responder = hold
    port = free_port()
    gateway = await gateways.start(
        telegram={
            "mode": "webhook",
            "webhook_port": port,
            "webhook_url": f"http://127.0.0.1:{port}/hook",
        },
    )
    update = fake.message_update(chat_id=ALICE, text="store me first", update_id=4001)
    assert await fake.post_webhook(update) == 200
    assert await gateway.app.store.pending_count() == 1  # stored before the 200
    assert await gateway.app.store.seen_update("telegram", "4001") is True
    release.set()
    await fake.wait_for_sent(chat_id=ALICE)


async def test_webhook_rejects_an_update_it_cannot_parse_and_takes_the_next(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    port = free_port()
    gateway = await gateways.start(
        telegram={
            "mode": "webhook",
            "webhook_port": port,
            "webhook_url": f"http://127.0.0.1:{port}/hook",
        },
    )
    malformed = fake.message_update(chat_id=CAROL, text="bold news", update_id=4101)
    malformed["message"]["entities"] = [{"type": "bold"}]  # python-telegram-bot cannot parse it
    assert await fake.post_webhook(malformed) == 200  # recorded: Telegram may forget it
    assert await gateway.app.store.rejected_updates("telegram") == ["4101"]
    fake_llm.script(Reply(text="Still here"))
    update = fake.message_update(chat_id=ALICE, text="hello?", update_id=4102)
    assert await fake.post_webhook(update) == 200
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.text == "Still here"
    assert fake.sent("sendMessage", CAROL) == []


async def test_polling_watchdog_restarts_a_hung_poll(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(telegram={"poll_timeout_seconds": 1, "watchdog_seconds": 2})
    await fake.wait_for_pending_polls()
    fake.stalled = True
    await fake.wait_until(lambda: gateway.channel.watchdog_restarts >= 1, timeout=10)
    fake.stalled = False
    fake_llm.script(Reply(text="Back again"))
    fake.send_user_message(chat_id=ALICE, text="anyone?")
    [reply] = await fake.wait_for_sent(chat_id=ALICE, timeout=10)
    assert reply.text == "Back again"


async def test_rate_limiter_option_still_delivers(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(telegram={"rate_limit": True})
    assert type(gateway.channel.bot).__name__ == "ExtBot"
    fake_llm.script(Reply(text="Paced"))
    fake.send_user_message(chat_id=ALICE, text="hello")
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.text == "Paced"


async def test_general_topic_sends_without_thread_but_typing_keeps_it(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    fake.add_chat({"id": GROUP, "type": "supergroup", "title": "Forum", "is_forum": True})
    general = ChatRef("telegram", str(GROUP), "group", thread_id="1")
    await gateway.channel.typing(general)
    await gateway.channel.send(Outbound(general, "in the general topic"))
    [action] = fake.sent("sendChatAction", GROUP)
    [sent] = fake.sent("sendMessage", GROUP)
    assert action.params["message_thread_id"] == 1
    assert "message_thread_id" not in sent.params

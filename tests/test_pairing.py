"""Pairing (access.dm_policy = "pairing"): a stranger gets one code until it is settled, the
owner hears of it once, and a code settled once — approved, denied or expired — is closed for
good."""

from __future__ import annotations

import re
from typing import Any

from bot.gateway.access import CODE_ALPHABET, CODE_LENGTH
from tests.admin_support import admin
from tests.conftest import OWNER_ID, Harness, dm

STRANGER = 42
CODE = re.compile(rf"your code is ([{CODE_ALPHABET}]{{{CODE_LENGTH}}})\b")


async def pairing(harness_factory: Any) -> Harness:
    return await harness_factory(access={"dm_policy": "pairing"})


async def write(harness: Harness, text: str, **kwargs: Any) -> str:
    await harness.send(dm(STRANGER, text, **kwargs))
    await harness.settle()
    return harness.channel.texts(str(STRANGER))[-1]


def code_in(answer: str) -> str:
    match = CODE.search(answer)
    assert match, answer
    return match.group(1)


async def test_a_stranger_writing_again_gets_the_same_code_and_the_owner_one_notice(
    harness_factory: Any,
) -> None:
    harness = await pairing(harness_factory)
    first = code_in(await write(harness, "hello?"))
    second = code_in(await write(harness, "are you there?"))
    assert first == second
    [notice] = harness.channel.texts(str(OWNER_ID))
    assert f"/admin approve {first}" in notice and f"/admin deny {first}" in notice
    assert [row["code"] for row in await harness.app.store.live_pairings()] == [first]


async def test_the_owners_notice_names_the_handle_only_when_there_is_one(
    harness_factory: Any,
) -> None:
    harness = await pairing(harness_factory)
    await write(harness, "hi", name="Carol")
    await harness.send(dm(STRANGER + 1, "hi", name="Dan"))
    await harness.settle()
    carol, dan = harness.channel.texts(str(OWNER_ID))
    assert "from Carol @carol (id 42 on test)" in carol
    assert "from Dan @dan (id 43 on test)" in dan


async def test_an_approved_code_is_closed_and_cannot_be_used_again(harness_factory: Any) -> None:
    harness = await pairing(harness_factory)
    code = code_in(await write(harness, "hello?"))
    assert f"Approved test:{STRANGER}." in await admin(harness, f"/admin approve {code}")
    assert (await harness.app.store.pairing(code))["status"] == "approved"  # type: ignore[index]
    assert await admin(harness, f"/admin approve {code}") == f"code {code} was already approved"
    assert "No pairing requests" in await admin(harness, "/admin pending")


async def test_a_denied_code_is_closed_and_the_stranger_stays_out(harness_factory: Any) -> None:
    harness = await pairing(harness_factory)
    code = code_in(await write(harness, "hello?"))
    assert "Refused the request" in await admin(harness, f"/admin deny {code}")
    assert (await harness.app.store.pairing(code))["status"] == "denied"  # type: ignore[index]
    assert await admin(harness, f"/admin approve {code}") == f"code {code} was already denied"
    assert "no open pairing code" in await admin(harness, f"/admin deny {code}")


async def test_an_expired_code_is_closed_when_the_owner_tries_it(harness: Harness) -> None:
    await harness.app.store.create_pairing("OLD234", "test:77", -1)
    assert "has expired" in await admin(harness, "/admin approve OLD234")
    assert (await harness.app.store.pairing("OLD234"))["status"] == "expired"  # type: ignore[index]
    assert await admin(harness, "/admin approve OLD234") == "code OLD234 was already expired"

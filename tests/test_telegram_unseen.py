"""Which update ids of a polled batch need no look-up in the store (no one can have recorded
them), so that only a redelivered or first batch costs a query per update."""

from __future__ import annotations

from typing import Any

from adapters.telegram_receiving import TelegramReceiving


def batch(*ids: int) -> list[dict[str, Any]]:
    return [{"update_id": i} for i in ids]


def receiving() -> TelegramReceiving:
    found = TelegramReceiving.__new__(TelegramReceiving)
    found._unseen_from = None  # as a poll loop starts
    return found


def test_a_poll_loops_first_batch_is_looked_up_whole() -> None:
    # a poller before this one (a crash, another leader) may have handled it unconfirmed
    assert receiving()._unseen(batch(7, 8)) == set()


def test_later_batches_are_new_and_a_batch_given_again_is_looked_up() -> None:
    polling = receiving()
    polling._unseen(batch(7, 8))
    assert polling._unseen(batch(9, 10)) == {9, 10}
    # not stored whole: Telegram gives it again, and some of it may be recorded
    assert polling._unseen(batch(9, 10, 11)) == {11}
    assert polling._unseen(batch()) == set()
    assert polling._unseen(batch(12)) == {12}

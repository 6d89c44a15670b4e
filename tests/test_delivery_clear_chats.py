"""What a process knows of chats without replies waiting for a retry (the send that skips
asking the database relies on it)."""

from __future__ import annotations

from bot.delivery.retries import ClearChats


def test_a_chat_found_without_waiting_replies_is_known_clear() -> None:
    clear = ClearChats(trusted=True)
    clear.found("c", clear.looking(), waiting=0)
    assert clear.known_clear("c")
    clear.found("d", clear.looking(), waiting=1)
    assert not clear.known_clear("d")


def test_a_retry_stored_forgets_every_chat_and_a_look_it_overlapped() -> None:
    clear = ClearChats(trusted=True)
    clear.found("c", clear.looking(), waiting=0)
    looked_at = clear.looking()  # a look at "d" begins ...
    clear.stored()  # ... a refusal is stored meanwhile ...
    clear.found("d", looked_at, waiting=0)  # ... and the look may not have seen it
    assert not clear.known_clear("c") and not clear.known_clear("d")


def test_where_workers_share_the_database_every_send_asks() -> None:
    clear = ClearChats(trusted=False)
    clear.found("c", clear.looking(), waiting=0)
    assert not clear.known_clear("c")

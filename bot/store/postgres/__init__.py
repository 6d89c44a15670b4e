"""The PostgreSQL backend, on asyncpg (one database shared by several gateway workers; see
DESIGN.md, "Scale-out path"). It mirrors the SQLite backend's layout: ``connection`` (opening
a database or a pool, the URL's password kept out of every message), ``migrations`` (the one
list of steps in :mod:`bot.store.schema`, applied in PostgreSQL's words, one worker at a
time), ``base`` (the pool, round trips, outages as the store's errors) and one module per
concern, so far ``audit`` (the audit log and settings), ``chats`` (chats and bindings),
``checkins`` (check-ins and reminders), ``sessions`` and ``review`` (review state),
``usage`` (usage counters and resting notices), ``users`` (users, pairing requests, owner
claims) and ``workers`` (the worker registry, the leader row and queue-key leases with
fencing epochs, claimed ``FOR UPDATE SKIP LOCKED``).

Not yet here: the other concerns of the :class:`bot.store.Store` interface, so ``[storage]``
cannot select PostgreSQL yet; SQLite is the only backend a gateway runs on."""

"""The PostgreSQL backend, on asyncpg (one database shared by several gateway workers; see
docs/architecture.md, "Several workers"), chosen by ``[storage] database_url``: ``connection``
(opening a pool, the URL's password kept out of every message), ``migrations`` (the steps of
:mod:`bot.store.migrations`, applied in PostgreSQL's words, one worker at a time), ``base``
(the pool, round trips, outages as the store's errors, a statement's ``?`` marks numbered), and
what PostgreSQL says otherwise than the shared concerns of :mod:`bot.store` — ``chats`` (a chat
and its person in one statement), ``media`` (an array parameter), ``documents`` (appending
bytes, an advisory lock) — or what is not yet written once: ``messages``, ``queue`` (pending
turns and delivery; a turn's outcome in one statement), ``turn_context`` (what a turn reads
first, in one statement), ``review``, ``search`` (BM25 over the same terms as SQLite's FTS5,
see its docstring for why a terms array), ``forgetting`` (and what VACUUM reaches),
``vectors``, ``workers`` (the worker registry, the leader row and queue-key leases with fencing
epochs, claimed ``FOR UPDATE SKIP LOCKED``); and ``store``, :class:`PostgresStore` composed
from them; ``copy`` moves a SQLite database into an empty PostgreSQL one (``companion database
copy``).

asyncpg rather than psycopg 3: it is faster per query, needs no libpq on the machine, and its
pool fits the store's short statements."""

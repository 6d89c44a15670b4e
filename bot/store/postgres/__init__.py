"""The PostgreSQL backend, on asyncpg (one database shared by several gateway workers; see
DESIGN.md, "Scale-out path"). It mirrors the SQLite backend's layout: ``connection`` (opening
a database, error translation, the URL's password kept out of every message) and
``migrations`` (the one list of steps in :mod:`bot.store.schema`, applied in PostgreSQL's
words, one worker at a time).

Not yet here: the concern modules that make up the :class:`bot.store.Store` interface, so
``[storage]`` cannot select PostgreSQL yet; SQLite is the only backend a gateway runs on."""

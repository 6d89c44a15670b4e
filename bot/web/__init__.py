"""The owner's web page: partners, memory, journals, people, usage, audit and status in a
browser, served by the gateway itself (aiohttp, server-rendered Jinja2 templates, no script).

It is off by default and listens on 127.0.0.1; the only way in is a one-time link that
``/admin web`` sends to the owner's DM. Every change goes through the functions the ``/admin``
commands use and is audited with the actor ``web:owner``.
"""

"""The composition root: the one place that builds the parts and the channels and hands each
what it needs (``build.py``), the process's life (``lifecycle.py``), the data directory's lock
(``lock.py``) and the channels (``channels.py``)."""

from bot.app.build import build_app as build_app
from bot.app.lifecycle import App as App
from bot.app.lifecycle import owner_memory_file as owner_memory_file
from bot.app.lock import DataDirBusy as DataDirBusy
from bot.app.lock import DataDirLock as DataDirLock

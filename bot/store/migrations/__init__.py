"""The database schema as an ordered list of steps, one module per step, applied in order
when a store opens (SQLite's ``PRAGMA user_version``, PostgreSQL's ``schema_version`` table
count the steps applied). What a step may be is in :mod:`bot.store.migrations.step`.

Each ``step_NN_<what>.py`` says in its docstring what the step does and defines ``STEP``;
where the databases differ, it spells out ``SQLITE`` and ``POSTGRES``, the exact text each
runs. A step that has shipped never changes: databases have applied it, and
``tests/test_schema_steps.py`` compares every step with the record of what shipped
(``tests/data/schema_steps.json``).

To add a step: write the next module (``step_28_<what>.py``), add it at the end of
``MODULES`` below, then run ``python -m tests.schema_steps --append``, which adds the new
step's texts to the record and never rewrites the ones it has."""

from types import ModuleType

from bot.store.migrations import (
    step_01_core_tables,
    step_02_forgetting_checkins_reminders,
    step_03_owner_administration,
    step_04_rejected_updates,
    step_05_turn_attempts,
    step_06_delivery_retries,
    step_07_forget_operations,
    step_08_stemmed_search,
    step_09_neighbour_context,
    step_10_search_scopes,
    step_11_owner_claims,
    step_12_media,
    step_13_message_vectors,
    step_14_web_logins,
    step_15_vector_log,
    step_16_postgres_search_index,
    step_17_workers,
    step_18_documents,
    step_19_worker_liveness,
    step_20_unfinished_replies,
    step_21_embedder_watermark,
    step_22_shard_leases,
    step_23_no_wakeup_trigger,
    step_24_impossible_message_times,
    step_25_tool_calls,
    step_26_confirmations,
    step_27_group_usage,
)
from bot.store.migrations.step import Dialect, Dialects, Migration, Step, for_dialect

MODULES: tuple[ModuleType, ...] = (
    step_01_core_tables,
    step_02_forgetting_checkins_reminders,
    step_03_owner_administration,
    step_04_rejected_updates,
    step_05_turn_attempts,
    step_06_delivery_retries,
    step_07_forget_operations,
    step_08_stemmed_search,
    step_09_neighbour_context,
    step_10_search_scopes,
    step_11_owner_claims,
    step_12_media,
    step_13_message_vectors,
    step_14_web_logins,
    step_15_vector_log,
    step_16_postgres_search_index,
    step_17_workers,
    step_18_documents,
    step_19_worker_liveness,
    step_20_unfinished_replies,
    step_21_embedder_watermark,
    step_22_shard_leases,
    step_23_no_wakeup_trigger,
    step_24_impossible_message_times,
    step_25_tool_calls,
    step_26_confirmations,
    step_27_group_usage,
)
"""The step modules in the order they are applied, numbered from 1."""

SCHEMA: list[Step] = [module.STEP for module in MODULES]
"""Every step, in order: a database that has applied ``n`` of them runs ``SCHEMA[n:]``."""

__all__ = ["MODULES", "SCHEMA", "Dialect", "Dialects", "Migration", "Step", "for_dialect"]

"""Fixtures of the protocol tests (record_states.py): `job`, `planned_job`, `store` (a module's
own `store` fixture wins)."""

from record_states import job, planned_job, store  # noqa: F401

"""Fixtures of the protocol tests (record_states.py): `job`, `planned_job`."""

from record_states import job, planned_job  # noqa: F401

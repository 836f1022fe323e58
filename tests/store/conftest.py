"""Kafka-layer fixtures shared by the store tests."""

from store_fixtures import clock, make_store, store_kind  # noqa: F401 - pytest fixtures

"""Expand the Kafka input topics of a live stateful stream job, keeping state and per-key order."""

__version__ = "0.1.0"

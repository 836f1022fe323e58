"""Kafka layer: confluent-kafka adapters, partitioner hashes, coordinator store, barrier."""

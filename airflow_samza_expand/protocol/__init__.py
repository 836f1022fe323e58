"""The expansion protocol (DESIGN section 2, layer 3): each step a plain function over a
coordinator store and a Kafka admin client, with no Airflow import, so the Airflow surface, a
CLI or another orchestrator drive the same steps.

* `ownership`: the expansion lease (holder ids, take, release, `lease_poll` for a waiting run).
* `plan`: `plan(store, admin, PlanRequest, holder) -> PlanOutcome`.
* `expand`: `expand(admin, store, ExpandRequest, expansion_id=...)` - at most once per intent.
* `waits`: the poll functions of every wait (`barrier_poll`, `stop_poll`, `ack_poll`,
  `partition_count_poll`) and the one reconnect policy (`Reconnect`).
* `restart`: stop, write job model vN+1, submit bookkeeping, acknowledgement, completion.
* `records`: conditional record updates (re-read and decide again on a stale revision).
* `secrets`: redaction of secret-looking Spark settings before anything is persisted.
"""

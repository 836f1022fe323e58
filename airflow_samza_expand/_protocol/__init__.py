"""The expansion protocol (DESIGN section 2, layer 3): each step a plain function over a
coordinator store and a Kafka admin client, with no Airflow import, so the Airflow surface, a
CLI or another orchestrator drive the same steps.

* `steps`: one module per step of the chain - `plan`, `expand`, `barrier`, `standby`, `stop`,
  `write_model`, `submit`, `ack`, `report` - each with its action, its poll (the wait's one
  implementation, for the trigger and for poke mode) and its typed result kept in the
  expansion record; `steps.STEPS` is their order (what the report and the UI iterate).
* `poll`: `Poll` (one look at a wait) and `Reconnect` (the one policy for transient faults).
* `ownership`: the expansion lease (holder ids, take, release, `lease_poll` for a waiting run).
* `order`: rule 1.5's evidence in the record (scan start, scans, the job's counts, report).
* `handover`: restart modes and `choose_restart` (rule 1.8); `recovery`: the failure state.
* `processors`: who blocks a stop, who is dead; `watch`: the partition count watch.
* `records`: conditional record updates (re-read and decide again on a stale revision).
* `secrets`: redaction of secret-looking Spark settings before anything is persisted.
"""

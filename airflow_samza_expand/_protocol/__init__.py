"""The expansion protocol (docs/design.md 'The layers'): each step a plain function over a
coordinator store and a Kafka admin client, with no Airflow import, so the Airflow surface, a
CLI or another orchestrator drive the same steps.

* `steps`: one module per step of the chain - `plan` (a package with what only it uses),
  `expand`, `standby`, `stop`, `write_model`, `submit`, `ack`, `report` - each with its action,
  its poll (the wait's one implementation, for the trigger and for poke mode) and its typed
  result kept in the expansion record; `steps.STEPS` is their order (what the report and the UI
  iterate). `barrier`: the ordering barrier's step, its rule and its evidence in the record.
* `restart`: one module per restart strategy and `choose_restart` over their registry.
* `job`: the Spark job's process from outside (detached launch, launches in the record, its
  checkpoint's position); `status`: a job's status and next action (the CLI and the UI).
* `cli`: the command line's code (`plan`, `init-job`, `status`, `stop`).
* `poll`: `Poll` (one look at a wait) and `Reconnect` (the one policy for transient faults).
* `ownership`: the expansion lease (holder ids, take, release, `lease_poll` for a waiting run).
* `outcome`: what the cluster must show before a run ends green; `recovery`: the failure state.
* `processors`: who blocks a stop, who is dead; `watch`: the partition count watch.
* `records`: conditional record updates (re-read and decide again on a stale revision).
* `secrets`: redaction of secret-looking Spark settings before anything is persisted.
"""

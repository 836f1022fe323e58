"""The ordering barrier's one home (docs/design.md 'The ordering barrier').

* `rule` - the pure rule: when it may snapshot, whether the job's count may stand for the scan,
  its next target (no Kafka, no store: an import contract).
* `reads` - the Kafka reads: the high watermarks snapshot, the group's lag against it.
* `stale_scan` - the scan of the old partitions for stale placements.
* `evidence` - the proof of order kept in the expansion record (scans before and after).
* `before_snapshot` - the look before the snapshot: stale placements counted, may it snapshot.
* `step` - the barrier step: grace, snapshot, lag drained, and its typed results.
* `progress` - what the step records for people watching (grace length, lag samples).
* `wait` - the one entry point of the Airflow sensor and trigger (grace, deadline, polls).
"""

"""The ordering barrier's one home (DESIGN rules 1.4, 1.5, 1.9).

* `step` - the barrier step: grace, snapshot, lag drained, and its typed results.
* `before_snapshot` - the look before the snapshot: stale placements counted, may it snapshot.
* `evidence` - the proof of order kept in the expansion record (scans before and after).
"""

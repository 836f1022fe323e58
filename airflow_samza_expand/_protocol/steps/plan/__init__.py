"""The plan step (`step`: validate the growth, take the expansion lease, record the intent
once) and what only it uses.

* `request`: what the step is asked (`PlanRequest`) and decides (`PlanOutcome`).
* `checks`: look-ups and measurements before it records anything (targets, resume, restart,
  conformance, lag).
* `readers`: the other managed jobs and consumer groups reading a grown topic.
* `job_models`: the job's latest job model, and the refusal when there is none.
* `policy`: the growth policy's targets from live figures.
* `wait`: the job must be live (`require_live`); the wait for it to come back.

Its result in the record (`PlanResult`) is in `_protocol.steps.results`, read by the report.
"""

"""A job's status as its coordinator records and Kafka tell it, shared by the `status` command
and the UI's job page.

* `job_status`: `read_status` (records, leases, live partition counts) -> `JobStatus`, and its
  text (`render`).
* `next_action`: the operator's next action, one decision for both views.
"""

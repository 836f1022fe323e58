"""The command line's own code (`samza-expand plan | init-job | status | stop`): each module
registers its subcommands with `airflow_samza_expand.cli`, which imports it lazily.

* `args`: the flags the commands share (the job, the Kafka connection, the coordinator store).
* `plan`: the plan of a job model, no cluster needed (imports only `core`).
* `init_job`: write a job's first job model; `init_adopt`: adopt a running job from its Spark
  checkpoint.
* `status`: the `status` and `stop` commands, over `_protocol.status`.
"""

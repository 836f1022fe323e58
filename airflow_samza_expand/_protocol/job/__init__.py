"""The Spark job's process as the protocol sees it from outside, without PySpark.

* `launch`: a detached launch (spark-submit or python run by a supervisor that outlives the
  caller), its log and liveness on this host.
* `launches`: the launches kept in the expansion record, judged from any worker by heartbeats.
* `spark_checkpoint`: the position a Spark checkpoint's offset log holds (adopting a job).
"""

"""Layer 3: the stateful PySpark job that honours the job model (never imports Airflow).

Modules: `source` (Kafka streaming data source by job-model task), `processor` (pluggable keyed
processor, shipped sequence counter), `state` (per-(task, key) state, checkpoint task-set guard),
`job` (entry point: ``python -m airflow_samza_expand.spark.job`` or spark-submit this file).
"""

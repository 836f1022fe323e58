"""Core layer: pure Python SEP-5 model (SSPs, job model, expansion algorithms, groupers, plan).

Imports neither Airflow, confluent_kafka nor pyspark (a test enforces it).
"""

"""Airflow surface: hook, operators, sensors and triggers of the partition expansion.

Import the classes from their modules (``.hooks``, ``.operators``, ``.sensors``, ``.triggers``);
this package imports nothing heavy itself so the provider's metadata loads fast.
"""

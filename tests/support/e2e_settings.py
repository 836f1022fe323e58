"""The end-to-end tests' job cadence and barrier timing (tests/e2e/conftest.py's scenarios, and
the fault matrix's CI cases in tests/airflow/test_airflow_fault_matrix.py)."""

# The jobs' micro-batch cadence in these tests: a quarter of the demo's (500 ms) - a Spark
# micro-batch costs driver CPU whether it carries 30 records or 120 (one shipped job at 60
# records/s, Apache Kafka, local[2]: 0.55 of a core at 1 s, 0.32 at 2 s), the suite runs on two
# cores, and nothing here measures the cadence. A test about batch timing passes its own
# ``trigger=``.
E2E_TRIGGER = "processing-time=2s"
# The barrier's producer refresh grace (and so the order check's quiet window) and the waits'
# poll interval of these tests: the producers refresh their metadata every second, so 3 s
# covers a refresh plus delivery (the demo keeps 4 s); a wait polled every 0.5 s ends up to
# half a second sooner. A test about the grace or the polling passes its own.
E2E_GRACE_S = 3.0
E2E_POLL_S = 0.5

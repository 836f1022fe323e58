"""The provider's UI plugin: read-only pages and a JSON API about each job's coordinator state.

* ``settings``: the ``[samza_expand]`` Airflow options the pages read (jobs, connection, store).
* ``data``: the ONLY module that reads the coordinator store, Kafka and job logs.
* ``views``: pure functions from job models / expansion records to the rows the pages show.
* ``html``: server-rendered HTML pages; ``app``: the FastAPI app (auth, routes, errors).
* ``links``: the operator extra link to a job's page; ``airflow.plugins`` registers it all.

See docs/ui.md.
"""

"""The provider's UI plugin: read-only pages and a JSON API about each job's coordinator state.

* ``settings``: the ``[samza_expand]`` Airflow options the pages read (jobs, connection, store).
* ``data``: the ONLY module that reads the coordinator store, Kafka and job logs.
* ``records`` / ``decode``: the typed records the pages show, and expansion records as them.
* ``views``: pure functions from job models / expansion records to the rows the pages show;
  ``running``: an expansion under way (step, grace, barrier lag), from its record.
* ``html``: the server-rendered jobs and job pages; ``pages``: the fault and API pages;
  ``app``: the FastAPI app (auth, routes, errors).
* ``links``: the operator extra link to a job's page; ``airflow.plugins`` registers it all.

See docs/ui.md.
"""

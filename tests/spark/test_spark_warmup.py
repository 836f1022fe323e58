"""The standby's warm-up with the job's own stateful pipeline (`spark._warmup`): it runs the
plan (applyInPandasWithState + foreachBatch + mapInArrow) to completion on throwaway rows with
a temporary checkpoint - a failure of any part is logged as a warning - and leaves no query and
no file behind."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest

from airflow_samza_expand.spark._processor import DEFAULT_PROCESSOR
from airflow_samza_expand.spark._warmup import warm_up_pipeline

pytestmark = pytest.mark.spark


def test_warm_up_runs_the_stateful_plan_and_leaves_nothing(spark, caplog) -> None:
    before = set(Path(tempfile.gettempdir()).glob("samza-expand-warmup-*"))
    with caplog.at_level(logging.INFO, logger="airflow_samza_expand.spark._warmup"):
        took = warm_up_pipeline(spark, DEFAULT_PROCESSOR, buckets=4)
    assert took > 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "warm-up query of the stateful plan took" in caplog.text
    assert not [q for q in spark.streams.active if q.name == "samza_expand_warm_up"]
    assert set(Path(tempfile.gettempdir()).glob("samza-expand-warmup-*")) == before


def test_a_broken_warm_up_is_logged_not_raised(spark, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_samza_expand.spark._warmup"):
        warm_up_pipeline(spark, "no.such.module:Processor", buckets=0)
    assert "warm-up query" in caplog.text and "colder" in caplog.text

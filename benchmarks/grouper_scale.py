"""How long GroupByPartitionFixedTasks takes to group ~1M SSPs after growth, at three sizes.

Each size: S streams grown from 256 to 1,024 partitions (4 x 256 = 1,024 tasks). The previous
mapping is the 256-partition job model; the timed call is ``group(ssps, previous_mapping)``
(building the SSP objects is not timed; the garbage collector is paused while timing,
as timeit does). Best of ``--repeat`` runs. Prints one line per size with
the ratio to the smallest size, then ``seconds_for_1M_ssps=<x>`` (the largest size scaled to
exactly 1,000,000 SSPs) as the last line.

    .venv/bin/python benchmarks/grouper_scale.py [--repeat 3] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import time

from airflow_samza_expand.core.groupers import GroupByPartitionFixedTasks
from airflow_samza_expand.core.model import SystemStreamPartition

INITIAL = 256
GROWN = 1024
STREAM_COUNTS = (250, 500, 1000)
SMOKE_STREAM_COUNTS = (2, 4)


def build(streams: int) -> tuple[list[SystemStreamPartition], dict[SystemStreamPartition, str]]:
    ssps = [
        SystemStreamPartition("kafka", f"stream-{s:04d}", p)
        for s in range(streams)
        for p in range(GROWN)
    ]
    previous = {ssp: f"Partition {ssp.partition}" for ssp in ssps if ssp.partition < INITIAL}
    return ssps, previous


def time_group(streams: int, repeat: int) -> tuple[int, float]:
    ssps, previous = build(streams)
    grouper = GroupByPartitionFixedTasks()
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()  # like timeit: measure the grouping, not collector pauses over the input
        try:
            start = time.perf_counter()
            groups = grouper.group(ssps, previous)
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    if len(groups) != INITIAL or sum(len(v) for v in groups.values()) != len(ssps):
        raise SystemExit(f"wrong grouping: {len(groups)} tasks for {len(ssps)} SSPs")
    return len(ssps), best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the best counts")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"CI size: streams {SMOKE_STREAM_COUNTS}, one run each (same code and last line)",
    )
    args = parser.parse_args(argv)
    counts = SMOKE_STREAM_COUNTS if args.smoke else STREAM_COUNTS
    results = [time_group(s, 1 if args.smoke else args.repeat) for s in counts]
    base_n, base_t = results[0]
    print(f"GroupByPartitionFixedTasks, growth {INITIAL} -> {GROWN} partitions per stream")
    for streams, (n, t) in zip(counts, results, strict=True):
        print(
            f"streams={streams:5d} ssps={n:9,d} seconds={t:7.3f} "
            f"size_ratio={n / base_n:4.1f} time_ratio={t / base_t:5.2f} "
            f"us_per_ssp={t / n * 1e6:5.2f}"
        )
    n, t = results[-1]
    print(f"seconds_for_1M_ssps={t * 1_000_000 / n:.3f}")


if __name__ == "__main__":
    main()

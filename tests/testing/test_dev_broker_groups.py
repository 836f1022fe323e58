"""Classic group coordinator of the development broker, driven in-process."""

from __future__ import annotations

import asyncio

from airflow_samza_expand._testing.broker.groups import (
    ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupCoordinator,
)

PROTOCOLS = [("range", b"meta")]


def _join(coord: GroupCoordinator, member_id: str = "", rebalance_s: float = 5.0):
    return coord.join(
        "g", member_id, None, "client", "/127.0.0.1", 10.0, rebalance_s, "consumer", PROTOCOLS
    )


def test_initial_delay_gathers_members_into_one_generation() -> None:
    async def scenario():
        coord = GroupCoordinator(initial_rebalance_delay_s=0.2)
        a, b = await asyncio.gather(_join(coord), _join(coord))
        return a, b

    a, b = asyncio.run(scenario())
    assert a["generation_id"] == b["generation_id"] == 1
    leader = a if a["members"] else b
    assert len(leader["members"]) == 2


def test_without_delay_first_member_completes_alone_then_rebalance() -> None:
    async def scenario():
        coord = GroupCoordinator()
        first = await _join(coord)
        assert first["generation_id"] == 1 and first["members"]
        sync = await coord.sync("g", 1, first["member_id"], {first["member_id"]: b"all"})
        assert sync["assignment"] == b"all"
        second_task = asyncio.create_task(_join(coord))
        await asyncio.sleep(0.05)
        hb = coord.heartbeat("g", 1, first["member_id"])
        rejoin = await _join(coord, first["member_id"])
        second = await second_task
        return hb, rejoin, second, coord

    hb, rejoin, second, coord = asyncio.run(scenario())
    assert hb == REBALANCE_IN_PROGRESS
    assert rejoin["generation_id"] == second["generation_id"] == 2
    assert coord.heartbeat("g", 2, "nobody") == UNKNOWN_MEMBER_ID
    assert coord.heartbeat("g", 1, rejoin["member_id"]) == ILLEGAL_GENERATION


def test_member_that_does_not_rejoin_is_dropped_at_rebalance_timeout() -> None:
    async def scenario():
        coord = GroupCoordinator()
        first = await _join(coord, rebalance_s=0.3)
        await coord.sync("g", 1, first["member_id"], {})
        second = await _join(coord, rebalance_s=0.3)  # first never rejoins
        return first, second, coord

    first, second, coord = asyncio.run(scenario())
    assert second["generation_id"] == 2
    assert [m["member_id"] for m in second["members"]] == [second["member_id"]]
    assert first["member_id"] not in coord.groups["g"].members

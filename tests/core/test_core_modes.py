"""The modes chosen by name are enums taken as strings at the edges: a member or its name (any
case, ``_`` for ``-``) parses to the member; anything else is a ValueError naming the setting,
the bad value and every valid one. The restart's names are the protocol registry's."""

from __future__ import annotations

import pytest

from airflow_samza_expand.core._modes import OnStalePlacement, OtherJobs, Restart, RunMode


@pytest.mark.parametrize(
    ("enum", "text", "member"),
    [
        (RunMode, "available_now", RunMode.AVAILABLE_NOW),
        (RunMode, " Continuous ", RunMode.CONTINUOUS),
        (Restart, "IN-APP", Restart.IN_APP),
        (Restart, Restart.TASK, Restart.TASK),
        (OnStalePlacement, "fail", OnStalePlacement.FAIL),
        (OtherJobs, "include", OtherJobs.INCLUDE),
    ],
)
def test_a_name_parses_to_its_member_which_is_its_string(enum, text, member) -> None:
    parsed = enum.parse(text, "x")
    assert parsed is member and parsed == member.value and f"{parsed}" == member.value
    assert f"{parsed!r}" == repr(member.value)  # a message names it as the user wrote it


@pytest.mark.parametrize(
    ("enum", "name", "choices"),
    [
        (RunMode, "run_mode", "'continuous', 'available-now'"),
        (Restart, "restart", "'auto', 'in-place', 'in-app', 'task', 'warm', 'cold'"),
        (OnStalePlacement, "on_stale_placement", "'warn', 'fail'"),
        (OtherJobs, "other_jobs", "'refuse', 'include', 'ignore'"),
    ],
)
def test_a_bad_name_is_a_value_error_naming_it_and_the_choices(enum, name, choices) -> None:
    with pytest.raises(ValueError, match=rf"^{name}='hot' is not known - use one of {choices}$"):
        enum.parse("hot", name)


def test_the_restart_names_are_the_registered_strategies() -> None:
    from airflow_samza_expand._protocol import restart

    assert Restart.values() == restart.modes()

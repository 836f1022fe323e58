"""The proof of order (docs/design.md 'Stale placements') on the Airflow surface: the restarted
job's order-check arguments, the ``on_stale_placement`` setting, and the report step's verdict.

* `with_order_check` - the shipped job's ``application_args`` plus ``--barrier-offsets auto``
  (the job takes the barrier and the detected partitioner from the record of the expansion
  that made its job model) and ``--on-stale-placement warn|fail``; flags the user already
  passes are kept as they are, never added twice.
* `check_setting` - parse-time validation of ``on_stale_placement`` (a Jinja template is
  checked once rendered, at run time).
* `order_refusal` - the report step's failure message when ``on_stale_placement="fail"`` and
  the order is at risk (None otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_samza_expand.core._order import ON_STALE_PLACEMENT

BARRIER_FLAG = "--barrier-offsets"
ON_STALE_FLAG = "--on-stale-placement"


def is_template(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def check_setting(value: Any, *, where: str = "on_stale_placement") -> str:
    """``warn`` or ``fail`` (a template passes, checked when rendered); otherwise an
    AirflowFailException naming the choices."""
    if is_template(value):
        return str(value)
    if value not in ON_STALE_PLACEMENT:
        raise AirflowFailException(
            f"{where}={value!r} is not understood - give 'warn' (count, log and report stale "
            "placements after the barrier snapshot) or 'fail' (also fail the report step and "
            "stop the restarted job)"
        )
    return str(value)


def check_order_settings(on_stale_placement: Any, stale_quiet_s: Any) -> None:
    """The factory's parse-time check of its rule-1.5 settings (templates pass)."""
    check_setting(on_stale_placement)
    if stale_quiet_s is None or is_template(stale_quiet_s):
        return
    try:
        quiet = float(stale_quiet_s)
    except (TypeError, ValueError):
        quiet = -1.0
    if not quiet >= 0:
        raise AirflowFailException(
            f"stale_quiet_s={stale_quiet_s!r} must be a number of seconds >= 0 (or None for the "
            "barrier's default, min(30 s, producer_refresh_grace_s))"
        )


def _has_flag(args: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def with_order_check(args: Sequence[Any], on_stale_placement: str) -> list[str]:
    """``args`` with the job's order check turned on (module docstring); the user's own
    ``--barrier-offsets`` / ``--on-stale-placement`` win."""
    value = check_setting(on_stale_placement)
    out = [str(a) for a in args]
    if not _has_flag(out, BARRIER_FLAG):
        out += [BARRIER_FLAG, "auto"]
    if not _has_flag(out, ON_STALE_FLAG):
        out += [ON_STALE_FLAG, value]
    return out


def order_refusal(order: Mapping[str, Any] | None, on_stale_placement: str) -> str | None:
    """The report step's failure message: ``fail`` and the order at risk (keys named)."""
    if check_setting(on_stale_placement) != "fail" or not order or order["order"] != "at risk":
        return None
    keys = ", ".join(repr(k["key"]) for k in order.get("keys_at_risk", [])[:10])
    more = " (and more)" if order.get("keys_at_risk_truncated") else ""
    return (
        f"{order['line']} - keys at risk: {keys}{more}. on_stale_placement='fail': a producer "
        "kept the old partition count after the barrier snapshot, so these keys' records in "
        "the old partitions may be processed after newer ones. Refresh that producer's "
        "metadata (metadata.max.age.ms / topic.metadata.refresh.interval.ms below the grace) "
        "or raise producer_refresh_grace_s, and check these keys' state"
    )


__all__ = ["check_order_settings", "check_setting", "order_refusal", "with_order_check"]

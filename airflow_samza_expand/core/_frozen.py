"""Immutable JSON values for the expansion record: a record's parts are frozen once, when they
enter it, and shared unchanged by every record derived from it.

`FrozenDict` and `FrozenList` are `dict` and `list` subclasses (JSON, equality with plain values
and ``isinstance`` checks work as before) whose changing methods raise TypeError. `freeze`
copies a plain value into them and returns a frozen one as it is, so a change to a record copies
only the changed part (the rest is already frozen) - a record update costs what it changes, not
the record's size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn


def _refuse(self: Any, *_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError(
        f"an expansion record's {type(self).__name__} is immutable - build a new value "
        "(e.g. {**value, key: new}) and store it with the record's with_result / advance"
    )


class _Immutable:
    """Copies are the value itself; a pickle rebuilds it from its plain form."""

    __slots__ = ()
    _plain: type

    def __reduce__(self) -> tuple[type, tuple[Any]]:
        return type(self), (self._plain(self),)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, _memo: dict) -> Any:
        return self


class FrozenDict(_Immutable, dict):
    """A dict no one changes (the record's plan, results and their nested maps)."""

    __slots__ = ()
    _plain = dict
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse


class FrozenList(_Immutable, list):
    """A list no one changes (the record's nested lists, e.g. barrier lag samples)."""

    __slots__ = ()
    _plain = list
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse


_SCALARS = (str, int, float, bool, type(None))
_KEPT = (*_SCALARS, FrozenDict, FrozenList)  # returned by `freeze` as they are


def freeze(value: Any, key: Callable[[Any], Any] = str) -> Any:
    """`value` as a frozen JSON value: mappings become `FrozenDict` (keys through `key`),
    lists and tuples `FrozenList`; an already frozen value is returned as it is (nothing
    under it is copied), values with ``to_dict`` (e.g. step times) their dict."""
    if isinstance(value, _KEPT):
        return value
    if isinstance(value, dict):  # JSON's own maps: the common case, without the ABC check
        return FrozenDict({key(k): freeze(v, key) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(v, key) for v in value])
    if isinstance(value, Mapping):
        return FrozenDict({key(k): freeze(v, key) for k, v in value.items()})
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return freeze(to_dict(), key)
    return value


def fresh_parts(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of `doc` that are not frozen yet (what a change brought): only these need
    checking (for secrets) before they are frozen - a frozen value was checked when it was."""
    if isinstance(doc, FrozenDict):
        return {}
    return {k: v for k, v in doc.items() if not isinstance(v, FrozenDict | FrozenList)}


def thaw(value: Any) -> Any:
    """A plain, mutable copy (dicts with string keys, lists) of a frozen or plain value."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    to_dict = getattr(value, "to_dict", None)
    return thaw(to_dict()) if callable(to_dict) else value


__all__ = ["FrozenDict", "FrozenList", "freeze", "fresh_parts", "thaw"]

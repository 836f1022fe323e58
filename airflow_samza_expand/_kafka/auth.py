"""Name a SASL/SSL authentication failure as one, at once, instead of "brokers unreachable".

librdkafka reports a failed SASL handshake or authentication (``_AUTHENTICATION``) and a failed
TLS handshake (``_SSL``) only through the client's ``error_cb``, while the blocking call that
needed the broker (``list_topics``, an admin future) keeps waiting until its timeout and then
says ``_TRANSPORT``. So clients get an `AuthWatch` as ``error_cb``, and blocking calls run in
short slices (`watched`), serving callbacks between them: the first authentication error ends
the call with `KafkaAuthenticationError` (a refusal: retrying with the same credentials cannot
help). The message names the brokers and librdkafka's reason, never a credential.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from airflow_samza_expand._kafka.config import bootstrap_of
from airflow_samza_expand.core.errors import KafkaAuthenticationError

AUTH_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL})
FIRST_SLICE_S = 0.25  # the first slice of a blocking call; each next one is twice as long

T = TypeVar("T")


class AuthWatch:
    """An ``error_cb`` that remembers the first authentication failure."""

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self._lock = threading.Lock()

    def __call__(self, error: KafkaError) -> None:
        if error.code() in AUTH_CODES:
            with self._lock:
                if self.error is None:
                    self.error = error

    def client_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """`settings` with this watch as ``error_cb`` (chaining one the caller set)."""
        chained = settings.get("error_cb")
        if not callable(chained):
            return {**settings, "error_cb": self}

        def both(error: KafkaError) -> None:
            self(error)
            chained(error)

        return {**settings, "error_cb": both}

    def raise_if_failed(self, what: str, config: Mapping[str, Any]) -> None:
        if self.error is not None:
            raise authentication_failed(what, config, self.error)


def authentication_failed(
    what: str, config: Mapping[str, Any], error: KafkaError
) -> KafkaAuthenticationError:
    protocol = config.get("security.protocol", "PLAINTEXT")
    mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    setup = f"security.protocol={protocol}" + (f", sasl.mechanism={mechanism}" if mechanism else "")
    return KafkaAuthenticationError(
        f"Kafka at {bootstrap_of(config)} refused authentication while {what} "
        f"({setup}): {error.str()} - the brokers are reachable; check the credentials, the SASL "
        "mechanism and security.protocol (or the TLS certificates) of the connection"
    )


def watched(
    call: Callable[[float], T],
    poll: Callable[[float], object],
    watch: AuthWatch,
    timeout_s: float,
    what: str,
    config: Mapping[str, Any],
) -> T:
    """`call(slice_timeout)` repeated in slices up to `timeout_s`, serving callbacks between
    slices (`poll(0)`); KafkaAuthenticationError as soon as the watch saw one. A slice that
    times out is retried with twice the time (so a slow broker sees a handful of requests, not
    one per slice); the last one's exception propagates."""
    deadline = time.monotonic() + timeout_s
    step = FIRST_SLICE_S
    while True:
        remaining = max(deadline - time.monotonic(), 0.01)
        this = min(step, remaining)
        try:
            return call(this)
        except (KafkaException, TimeoutError) as exc:
            poll(0)
            watch.raise_if_failed(what, config)
            if this >= remaining or not _is_slice_timeout(exc):
                raise
        step *= 2


def _is_slice_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error is not None and error.code() in (
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    )


__all__ = ["AUTH_CODES", "AuthWatch", "authentication_failed", "watched"]

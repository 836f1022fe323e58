"""Malformed, oversized and unknown frames close only the offending connection (dev broker)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka.admin import AdminClient


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _api_versions_v0(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def _api_versions_roundtrip(sock: socket.socket, correlation_id: int) -> int:
    sock.sendall(_api_versions_v0(correlation_id))
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    payload = _recv_exact(sock, size)
    corr, error_code = struct.unpack_from(">ih", payload)
    assert corr == correlation_id
    return error_code


def _is_closed_by_broker(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _wait_for_log(dev_broker, text: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in dev_broker.log_text():
        if time.monotonic() > deadline:
            raise AssertionError(f"broker log never showed {text!r}")
        time.sleep(0.05)


GARBAGE = {
    "oversized": struct.pack(">i", 2_000_000_000) + b"\x00" * 16,
    "negative-size": struct.pack(">i", -5) + b"\x00" * 16,
    "too-short": struct.pack(">i", 3) + b"abc",
    "unknown-api-key": struct.pack(">ihhih", 10, 9999, 0, 1, 0),
    "unsupported-version": struct.pack(">ihhih", 10, 3, 999, 1, 0),
    "undecodable-body": struct.pack(">ihhih", 14, 19, 7, 1, 0) + b"\xff\xff\xff\xff",
}
LOG_LINES = {
    "oversized": "frame size 2000000000 outside",
    "negative-size": "frame size -5 outside",
    "too-short": "frame size 3 outside",
    "unknown-api-key": "unsupported api key 9999",
    "unsupported-version": "Metadata v999 not supported",
    "undecodable-body": "malformed request",
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_garbage_closes_only_that_connection(dev_broker, kind: str) -> None:
    healthy = _connect(dev_broker.bootstrap)
    assert _api_versions_roundtrip(healthy, 1) == 0

    bad = _connect(dev_broker.bootstrap)
    bad.sendall(GARBAGE[kind])
    assert _is_closed_by_broker(bad), "the broker should close the connection that sent garbage"
    bad.close()
    _wait_for_log(dev_broker, LOG_LINES[kind])

    # The connection opened before keeps working, and new clients are served.
    assert _api_versions_roundtrip(healthy, 2) == 0
    healthy.close()
    metadata = AdminClient({"bootstrap.servers": dev_broker.bootstrap}).list_topics(timeout=10)
    assert metadata.brokers


def test_unsupported_api_versions_version_gets_v0_error_answer(dev_broker) -> None:
    """KIP-511: an ApiVersions version we do not know is answered in v0 with error 35."""
    sock = _connect(dev_broker.bootstrap)
    body = struct.pack(">hhih", 18, 99, 5, 0)
    sock.sendall(struct.pack(">i", len(body)) + body)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    corr, error_code, count = struct.unpack_from(">ihi", _recv_exact(sock, size))
    sock.close()
    assert (corr, error_code) == (5, 35)
    assert count > 10


def test_truncated_frame_then_close_is_logged_and_harmless(dev_broker) -> None:
    sock = _connect(dev_broker.bootstrap)
    sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
    sock.close()
    metadata = AdminClient({"bootstrap.servers": dev_broker.bootstrap}).list_topics(timeout=10)
    assert metadata.brokers

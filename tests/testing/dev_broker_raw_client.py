"""Raw Kafka requests to the development broker, encoded and decoded with kio (tests only)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from airflow_samza_expand._testing.broker.codec import build


def call(bootstrap: str, api_key: int, version: int, body: dict) -> Any:
    """Send one request built from `body`; return the decoded response entity."""
    req_cls = load_request_schema(api_key, version)
    header_cls = req_cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=42,
            client_id="raw-test",
        ),
    )
    entity_writer(req_cls)(buf, build(req_cls, body))
    payload = buf.getvalue()
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        data = recv_exact(sock, size)
    resp_cls = load_response_schema(api_key, version)
    header, used = entity_reader(resp_cls.__header_schema__)(data, 0)
    assert header.correlation_id == 42
    return entity_reader(resp_cls)(data, used)[0]


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "broker closed the connection"
        buf += chunk
    return buf

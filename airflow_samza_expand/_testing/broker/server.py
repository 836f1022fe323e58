"""Asyncio server of the development Kafka broker (test/dev tool only - production uses Kafka).

One task per client connection reads size-prefixed frames and answers them in order. A frame
that is oversized, truncated, of an unknown API or version, or that kio cannot decode closes
that connection only, with a log line. A second loopback port takes fault-injection commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from ..faults import FaultTable
from .apis import API_VERSIONS_KEY, APIS, APIS_BY_NAME, advertised_versions
from .codec import FrameError, decode_request, encode_response, peek_header
from .groups import GroupCoordinator
from .state import ClusterState

log = logging.getLogger("airflow_samza_expand._testing.broker")

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


class Broker:
    """State plus listeners of one development broker."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9092,
        data_dir: Path | None = None,
        control_port: int = 0,
        advertised_host: str | None = None,
        auto_create_topics: bool = False,
        default_partitions: int = 1,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        initial_rebalance_delay_s: float = 0.0,
    ) -> None:
        self.host = host
        self.port = port
        self.control_port = control_port
        self.advertised_host = advertised_host or host
        self.auto_create_topics = auto_create_topics
        self.default_partitions = default_partitions
        self.max_frame_bytes = max_frame_bytes
        self.state = ClusterState(data_dir)
        self.groups = GroupCoordinator(initial_rebalance_delay_s)
        self.faults = FaultTable(
            set(APIS_BY_NAME),
            {e.name: int(e.value) for e in ErrorCode},
            {s.name for s in APIS.values() if s.error_response is not None},
        )
        self.data_version = 0
        self._data_event = asyncio.Event()
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[asyncio.Task] = set()

    # ---- long-poll support ------------------------------------------------------------
    def notify_data(self) -> None:
        self.data_version += 1
        self._data_event.set()
        self._data_event = asyncio.Event()

    async def wait_for_data(self, seen_version: int, timeout: float) -> None:
        if self.data_version != seen_version:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._data_event.wait(), timeout)

    # ---- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        server = await asyncio.start_server(self._serve_client, self.host, self.port, limit=1 << 20)
        self.port = server.sockets[0].getsockname()[1]
        control = await asyncio.start_server(self._serve_control, "127.0.0.1", self.control_port)
        self.control_port = control.sockets[0].getsockname()[1]
        self._servers = [server, control]
        self.groups.start()
        log.info(
            "development Kafka broker listening on %s:%d (control port %d, data dir %s)",
            self.host,
            self.port,
            self.control_port,
            self.state.data_dir or "in memory",
        )

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        self.groups.stop()
        self.state.close()
        log.info("development Kafka broker stopped")

    # ---- client connections -----------------------------------------------------------
    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        log.info("connection from %s", peer_s)
        reason = "closed by client"
        try:
            reason = await self._request_loop(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            reason = "connection lost"
        except asyncio.CancelledError:
            reason = "broker stopping"
        except Exception:
            log.exception("internal error serving %s; closing that connection", peer_s)
            reason = "internal error"
        finally:
            self._connections.discard(task)
            writer.close()
            log.info("connection from %s closed (%s)", peer_s, reason)

    async def _request_loop(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> str:
        while True:
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                return "closed by client" if not exc.partial else "truncated frame size"
            size = int.from_bytes(head, "big", signed=True)
            if size < 8 or size > self.max_frame_bytes:
                log.warning(
                    "closing connection: frame size %d outside 8..%d bytes",
                    size,
                    self.max_frame_bytes,
                )
                return "bad frame size"
            frame = await reader.readexactly(size)
            api_key, version, correlation_id = peek_header(frame)
            spec = APIS.get(api_key)
            if spec is None:
                log.warning(
                    "closing connection: unsupported api key %d (correlation id %d)",
                    api_key,
                    correlation_id,
                )
                return "unsupported api key"
            if not spec.min_version <= version <= spec.max_version:
                if api_key == API_VERSIONS_KEY:  # KIP-511: answer v0 with our ranges
                    writer.write(
                        encode_response(
                            API_VERSIONS_KEY,
                            0,
                            correlation_id,
                            {"error_code": 35, "api_keys": advertised_versions()},
                        )
                    )
                    await writer.drain()
                    continue
                log.warning(
                    "closing connection: %s v%d not supported (supported v%d-v%d)",
                    spec.name,
                    version,
                    spec.min_version,
                    spec.max_version,
                )
                return "unsupported api version"
            try:
                request = decode_request(frame)
            except FrameError as exc:
                log.warning(
                    "closing connection: malformed request: %s (first bytes %s)",
                    exc,
                    frame[:64].hex(),
                )
                return "malformed request"
            log.debug(
                "%s v%d correlation_id=%d client_id=%s",
                spec.name,
                version,
                correlation_id,
                request.client_id,
            )
            body: dict[str, Any] | None
            fault = self.faults.take(spec.name)
            if fault is not None:
                log.info("fault %s on %s (hit %d)", fault.kind, spec.name, fault.hits)
                if fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                if fault.kind == "drop_connection":
                    return f"injected drop_connection on {spec.name}"
                if fault.kind == "apply_then_timeout":
                    await spec.handler(self, request)
                    continue
                if fault.kind == "error":
                    assert spec.error_response is not None and fault.error_code is not None
                    body = spec.error_response(request, fault.error_code)
                else:
                    body = await spec.handler(self, request)
            else:
                body = await spec.handler(self, request)
            if body is None:  # acks=0 produce: no response
                continue
            writer.write(encode_response(api_key, version, correlation_id, body))
            await writer.drain()

    # ---- control channel --------------------------------------------------------------
    async def _serve_control(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while line := await reader.readline():
                try:
                    cmd = json.loads(line)
                    reply = (
                        self.faults.handle_command(cmd)
                        if isinstance(cmd, dict)
                        else {"ok": False, "error": "send one JSON object per line"}
                    )
                except ValueError as exc:
                    reply = {"ok": False, "error": f"invalid JSON: {exc}"}
                log.info(
                    "control command %s -> %s",
                    line.strip().decode(errors="replace"),
                    "ok" if reply.get("ok") else reply.get("error"),
                )
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


async def run_broker(
    broker: Broker, ready_file: Path | None = None, exit_with_parent: bool = False
) -> None:
    """Serve until SIGINT/SIGTERM; write {host, port, control_port, pid} to `ready_file`.

    With `exit_with_parent`, also stop once the process that started the broker is gone, so a
    test session killed without teardown leaves no broker behind.
    """
    await broker.start()
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(
            json.dumps(
                {
                    "host": broker.advertised_host,
                    "port": broker.port,
                    "control_port": broker.control_port,
                    "pid": os.getpid(),
                }
            )
        )
        os.replace(tmp, ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    watchdog = None
    if exit_with_parent:
        watchdog = loop.create_task(_watch_parent(os.getppid(), stop))
    try:
        await stop.wait()
    finally:
        if watchdog is not None:
            watchdog.cancel()
        await broker.stop()


async def _watch_parent(parent_pid: int, stop: asyncio.Event) -> None:
    while True:
        await asyncio.sleep(0.5)
        if os.getppid() != parent_pid:
            log.warning("parent process %d exited; stopping the development broker", parent_pid)
            stop.set()
            return

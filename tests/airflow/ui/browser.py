"""A real headless Chromium driven over the DevTools protocol (no Selenium, no browser download).

Uses Debian's ``chromium`` (``scripts/setup.sh`` installs it when missing and run as root), or
the binary named by ``CHROMIUM``. ``Browser`` starts it on a private profile with the DevTools
endpoint on 127.0.0.1 (a free port chosen by Chromium), drives one page over a WebSocket
(``websockets.sync``), and stops the process by its pid.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_binary() -> str | None:
    """The Chromium to use: ``$CHROMIUM`` or the first candidate on PATH."""
    named = os.environ.get("CHROMIUM")
    if named:
        return named
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``condition`` until it returns something truthy (then return it) or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, binary: str, *, width: int = 1280, height: int = 900) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="samza-expand-chromium-"))
        args = [
            binary,
            "--headless=new",
            "--no-sandbox",  # tests may run as root (containers)
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        port = wait_for(
            lambda: port_file.exists() and port_file.read_text().split("\n")[0].strip(),
            60,
            "Chromium's DevTools port",
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        page = next(t for t in targets if t.get("type") == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024)
        )
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.send("Page.enable")
        self.send("Network.enable")

    def send(self, method: str, params: dict[str, Any] | None = None, timeout_s: float = 60) -> Any:
        """Call a DevTools method and return its result (events seen meanwhile are kept)."""
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout_s
        while True:
            message = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.send("Network.setCookie", {"url": url, "name": name, "value": value, "path": "/"})

    def open(self, url: str, timeout_s: float = 60) -> int | None:
        """Navigate and wait for the load event; returns the document's HTTP status."""
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self._wait_event("Page.loadEventFired", timeout_s)
        status = None
        for event in self.events:
            if event.get("method") == "Network.responseReceived":
                params = event["params"]
                if params.get("type") == "Document" and status is None:
                    status = params["response"]["status"]
        return status

    def _wait_event(self, method: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {method} within {timeout_s:g} s")
            self.events.append(json.loads(self.ws.recv(timeout=remaining)))

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result.get("result", {}).get("value")

    def text(self) -> str:
        """The page's visible text (``document.body.innerText``)."""
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        """PNG of the page (the whole scroll height when ``full_page``)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": metrics["width"],
                "height": min(metrics["height"], 6000),
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=20)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

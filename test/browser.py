"""A real headless Chromium driven over the DevTools protocol on a pipe (no port, no
network): open a page, collect console errors, uncaught exceptions and every request,
and take a full-page PNG screenshot."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageRun:
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    screenshot: bytes = b""


class Browser:
    """Chromium with --remote-debugging-pipe: commands on its fd 3, answers on fd 4."""

    def __init__(self, binary: str):
        self.profile = tempfile.mkdtemp(prefix="robot_memory_chromium_")
        child_in, self._write = os.pipe()
        self._read, child_out = os.pipe()
        # Above 10, so `3<&` cannot clobber one before it is copied.
        to_child = fcntl.fcntl(child_in, fcntl.F_DUPFD_CLOEXEC, 10)
        from_child = fcntl.fcntl(child_out, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(child_in)
        os.close(child_out)
        self.log = open(Path(self.profile) / "chromium.log", "wb")
        # bash puts the pipe ends on fds 3 and 4, where --remote-debugging-pipe
        # expects them (no preexec_fn: the test process may run threads).
        self.process = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_child} 4>&{from_child} '
                                f"{to_child}<&- {from_child}>&-",
             binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-default-apps", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            pass_fds=(to_child, from_child))
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                return None
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                log = (Path(self.profile) / "chromium.log").read_text(errors="replace")
                raise RuntimeError(f"chromium closed the DevTools pipe: {log[-2000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self._receive(deadline - time.monotonic())
            if message is None:
                break
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)
        raise TimeoutError(f"no answer to {method} within {timeout} s")

    def wait_event(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            message = self._receive(max(0.0, deadline - time.monotonic()))
            if message is None:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.events.append(message)

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (message := self._receive(max(0.0, deadline - time.monotonic()))) is not None:
            self.events.append(message)

    def open(self, url: str, width: int = 1100) -> PageRun:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900,
                                                         "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired")
        self.drain(1.0)  # late console messages and requests
        run = PageRun()
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and \
                    params.get("type") in ("error", "assert"):
                run.console_errors.append(" ".join(str(a.get("value", a.get("description")))
                                                   for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                run.console_errors.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                run.console_errors.append(params["entry"]["text"])
            elif method == "Network.requestWillBeSent":
                run.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                run.failed_requests.append(f"{params.get('errorText')} ({params['requestId']})")
        shot = self.call("Page.captureScreenshot", {"format": "png",
                                                    "captureBeyondViewport": True},
                         session=session)
        run.screenshot = base64.b64decode(shot["data"])
        return run

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self.process.wait(timeout=10)
        except Exception:  # already gone, or hung: make sure it ends
            self.process.kill()
            self.process.wait(timeout=10)
        finally:
            os.close(self._write)
            os.close(self._read)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)


def open_page(path: Path) -> PageRun:
    binary = chromium_path()
    if binary is None:
        raise RuntimeError("chromium not found: `make setup` installs Debian's chromium "
                           "package (scripts/ensure_chromium.sh)")
    browser = Browser(binary)
    try:
        return browser.open(path.resolve().as_uri())
    finally:
        browser.close()

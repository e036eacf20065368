"""Headless Chromium driven over the Chrome DevTools Protocol, with aiohttp's WebSocket client
(already a dependency): no WebDriver, no Node. Debian's ``chromium`` package (.ci/run
installs it); ``KAIWO_CHROMIUM`` names another binary.

    async with Chromium.start(tmp_path) as browser:
        page = await browser.new_page(headers={"Authorization": "Bearer ..."})
        await page.goto("http://127.0.0.1:8090/workloads")
        text = await page.evaluate("document.querySelector('main').innerText")
        await page.screenshot(path)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp


def chromium_binary() -> str:
    """The browser to drive; an AssertionError saying how to install it when there is none."""
    found = os.environ.get("KAIWO_CHROMIUM") or shutil.which("chromium")
    assert found, "no chromium: apt-get install chromium (.ci/run does), or set KAIWO_CHROMIUM"
    return found


@dataclass
class Page:
    socket: aiohttp.ClientWebSocketResponse
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    events: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        await self.socket.send_json({"id": number, "method": method, "params": params})
        while True:
            message = await self.socket.receive_json(timeout=120)
            if message.get("id") == number:
                assert "error" not in message, message["error"]
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.put_nowait(message)

    async def goto(self, url: str) -> None:
        while not self.events.empty():
            self.events.get_nowait()
        await self.call("Page.navigate", url=url)
        while True:
            event = await self._next_event()
            if event["method"] == "Page.loadEventFired":
                return

    async def _next_event(self) -> dict[str, Any]:
        if not self.events.empty():
            return self.events.get_nowait()
        message: dict[str, Any] = await self.socket.receive_json(timeout=120)
        return message

    async def evaluate(self, expression: str) -> Any:
        answer = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        await asyncio.to_thread(_write, path, base64.b64decode(shot["data"]))


@dataclass
class Chromium:
    process: asyncio.subprocess.Process
    port: int
    session: aiohttp.ClientSession

    @classmethod
    @contextlib.asynccontextmanager
    async def start(
        cls, profile: Path, *, width: int = 1280, height: int = 900
    ) -> AsyncIterator[Chromium]:
        await asyncio.to_thread(profile.mkdir, parents=True, exist_ok=True)
        process = await asyncio.create_subprocess_exec(
            chromium_binary(),
            "--headless=new",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            port = await _debugging_port(profile / "DevToolsActivePort", process)
            async with aiohttp.ClientSession() as session:
                yield cls(process, port, session)
        finally:
            if process.returncode is None:
                process.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), 30)
                if process.returncode is None:
                    process.kill()
                    await process.wait()

    @contextlib.asynccontextmanager
    async def new_page(self, *, headers: dict[str, str] | None = None) -> AsyncIterator[Page]:
        async with self.session.put(f"http://127.0.0.1:{self.port}/json/new?about:blank") as made:
            target = json.loads(await made.text())
        async with self.session.ws_connect(
            target["webSocketDebuggerUrl"], max_msg_size=64 * 1024 * 1024
        ) as socket:
            page = Page(socket)
            await page.call("Page.enable")
            await page.call("Network.enable")
            if headers:
                await page.call("Network.setExtraHTTPHeaders", headers=headers)
            yield page


async def _debugging_port(active: Path, process: asyncio.subprocess.Process) -> int:
    """Chromium writes the port it chose to ``DevToolsActivePort`` in its profile."""
    for _ in range(1200):
        assert process.returncode is None, "chromium exited at start"
        port = await asyncio.to_thread(_port_in, active)
        if port is not None:
            return port
        await asyncio.sleep(0.05)
    raise AssertionError("chromium did not open its debugging port in 60 s")


def _port_in(active: Path) -> int | None:
    lines = active.read_text().splitlines() if active.exists() else []
    return int(lines[0]) if lines and lines[0].isdigit() else None


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)

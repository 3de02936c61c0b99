"""Open the built documentation site in headless Chromium: console errors fail, screenshots stay.

    python3 scripts/docs_site.py [SITE_DIR] [SCREENSHOT_DIR]

(defaults: build-docs/site, from `mkdocs build`, and build-docs/screenshots).
The site is served over HTTP on 127.0.0.1 (the search runs in a web worker,
which a file:// page may not start), and each page in PAGES is loaded in
headless Chromium through its DevTools protocol: every console error, uncaught
exception and failed request is reported and fails the run (exit 1), and a
PNG of each page is kept. A code block whose text is wider than the block (its
end hidden at the 1280-pixel window) fails the run too. Needs `chromium` (Debian's package) and Python's
standard library only (a minimal WebSocket client below).
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

# The home page and one API page: name of the screenshot -> path in the site.
PAGES = {"home": "", "api-grad_reverse": "api/grad_reverse/", "dann": "dann/"}
# A code block whose text is wider than the block hides its end (the theme scrolls it): each
# block must wrap (docs/extra.css) or fit.
HIDDEN_CODE = """[...document.querySelectorAll('pre > code')]
  .filter(code => code.scrollWidth > code.clientWidth + 1)
  .map(code => code.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 80))"""
WIDTH, HEIGHT = 1280, 1600
LOAD_TIMEOUT_S = 30


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, client-masked."""

    def __init__(self, url: str):
        host_port, path = url[len("ws://") :].split("/", 1)
        host, port = host_port.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=LOAD_TIMEOUT_S)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(1)
        if b" 101 " not in response.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"DevTools refused the WebSocket: {response[:200]!r}")

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            data += chunk
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            message += self._read(length)
            if first & 0x80:  # FIN
                return message.decode()


class DevTools:
    def __init__(self, url: str):
        self.ws = WebSocket(url)
        self.next_id = 0
        self.events = []

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == event for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {timeout} s")
            self.events.append(json.loads(self.ws.receive()))


def problems_in(events: list) -> list:
    """Console errors, uncaught exceptions and failed requests among DevTools events."""
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(
                "console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            found.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".strip())
    return found


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would bury the result
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list) -> int:
    site = Path(argv[0] if argv else "build-docs/site").resolve()
    shots = Path(argv[1] if len(argv) > 1 else "build-docs/screenshots")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not (site / "index.html").is_file():
        print(f"docs_site.py: {site} holds no built site (run `mkdocs build` first)", file=sys.stderr)
        return 2
    if browser is None:
        print("docs_site.py: no chromium on PATH (Debian: apt install chromium)", file=sys.stderr)
        return 2
    shots.mkdir(parents=True, exist_ok=True)

    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    debug_port = free_port()
    profile = tempfile.mkdtemp(prefix="docs-site-chromium-")
    process = subprocess.Popen(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", f"--user-data-dir={profile}",
         f"--remote-debugging-port={debug_port}", f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    failures = []
    try:
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json/list", timeout=2) as response:
                    targets = [t for t in json.load(response) if t.get("type") == "page"]
                if targets:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("chromium's DevTools did not answer")
            time.sleep(0.2)
        tab = DevTools(targets[0]["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log"):
            tab.call(f"{domain}.enable")
        for name, path in PAGES.items():
            url = f"http://127.0.0.1:{server.server_address[1]}/{path}"
            tab.events.clear()
            tab.call("Page.navigate", url=url)
            tab.wait_for("Page.loadEventFired", LOAD_TIMEOUT_S)
            time.sleep(1.0)  # scripts that run after load (search index, highlighting)
            tab.call("Runtime.evaluate", expression="1")  # collects the events sent meanwhile
            png = base64.b64decode(tab.call("Page.captureScreenshot", format="png")["data"])
            (shots / f"{name}.png").write_bytes(png)
            title = tab.call("Runtime.evaluate", expression="document.title")["result"].get("value")
            found = problems_in(tab.events)
            hidden = tab.call("Runtime.evaluate", expression=HIDDEN_CODE, returnByValue=True)["result"].get("value")
            found += [f"a code block hides the end of its widest line: {line!r}" for line in hidden or []]
            print(f"docs_site.py: {url} ({title!r}): {len(found)} console errors, screenshot {shots / name}.png")
            failures += [f"{url}: {problem}" for problem in found]
    finally:
        process.terminate()
        process.wait(timeout=10)
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    for failure in failures:
        print(f"docs_site.py: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

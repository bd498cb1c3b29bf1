"""The report in a real headless Chromium, driven over the Chrome DevTools Protocol with a small
websocket client written here (standard library only).

One browser for the module; each report is opened in a fresh page. Checked: no console error and
no uncaught exception, every figure drawn (plotly's ``.main-svg`` and at least one trace in each
figure div) and its screenshot not blank (non-white pixels counted in the PNG, decoded with
zlib/struct), no network request that leaves the page (CDP ``Network.requestWillBeSent``; the
browser also runs with every host name mapped to nothing and a dead proxy), and a hostile model
name that runs nothing. A missing Chromium is a failure, not a skip: ``.ci/run`` installs it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str:
    env = os.environ.get("ROOFLINE_CHROMIUM")
    if env:
        return env
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium not found (tried " + ", ".join(CHROMIUM_NAMES) + "; set ROOFLINE_CHROMIUM): "
                "install it with `apt-get install chromium` (.ci/run does this)", pytrace=False)


# ------------------------------------------------------------------------------------------------
# A minimal websocket client (RFC 6455): text frames out (masked), frames in, fragmentation.
# ------------------------------------------------------------------------------------------------


class WebSocket:
    def __init__(self, url: str, timeout: float = 30.0):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        assert m, url
        host, port, path = m.group(1), int(m.group(2)), m.group(3)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, "websocket handshake: connection closed"
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        assert b" 101 " in status.split(b"\r\n")[0], status
        self.buf = rest

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text: str) -> None:
        payload = text.encode()
        n = len(payload)
        header = bytes([0x81])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self) -> str:
        parts = []
        while True:
            b0, b1 = self._read(2)
            fin, opcode = b0 & 0x80, b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            data = self._read(n)
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode in (0x9, 0xA):  # ping / pong: ignore
                continue
            parts.append(data)
            if fin:
                return b"".join(parts).decode()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Page:
    """One CDP connection to a page: commands, and the events seen while waiting for replies."""

    def __init__(self, ws_url: str):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, timeout: float = 30.0, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(method)

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate {expression!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.1)
        raise TimeoutError(f"waited {timeout} s for {expression}")


class Browser:
    FLAGS = (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio",
        "--hide-scrollbars", "--window-size=1400,900",
        # nothing may leave the page: every host name resolves to nothing, and any proxied request dies
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
    )

    def __init__(self, exe: str):
        self.tmp = tempfile.mkdtemp(prefix="roofline-chromium-")
        self.proc = subprocess.Popen(
            [exe, *self.FLAGS, f"--user-data-dir={self.tmp}", "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 30
        self.port = None
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            lines.append(line)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.close()
            pytest.fail("Chromium did not start its DevTools endpoint:\n" + "".join(lines[-20:]), pytrace=False)

    def new_page(self) -> Page:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            target = json.loads(r.read())
        return Page(target["webSocketDebuggerUrl"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# PNG decoding (enough for Chromium's 8-bit RGB/RGBA screenshots)
# ------------------------------------------------------------------------------------------------


def png_pixels(png: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows of raw pixel bytes), every filter type undone."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(png):
        n, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), f"unsupported PNG: depth {depth}, colour type {color}"
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def non_white_fraction(png: bytes) -> float:
    w, h, bpp, rows = png_pixels(png)
    dark = 0
    for row in rows:
        for i in range(0, len(row), bpp):
            if row[i] < 235 or row[i + 1] < 235 or row[i + 2] < 235:
                dark += 1
    return dark / (w * h)


# ------------------------------------------------------------------------------------------------
# Fixtures: the browser, and the reports it opens
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    b = Browser(find_chromium())
    yield b
    b.close()


def _report(tmp: Path, *args: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)  # --out creates no folders unless asked
    out = tmp / "report.html"
    r = CliRunner().invoke(app, ["report", *args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory, hostile_model_path):
    """The default report, a multi-GPU MoE report with measured results and a baseline, and a
    report of a model whose name is a script tag."""
    from test_report import write_results  # the same synthetic results the other tests use

    base = tmp_path_factory.mktemp("browser-reports")
    res = write_results(base / "results.json", slow=1.0)
    old = write_results(base / "baseline.json", slow=0.8)
    return {
        "default": _report(base / "a"),
        "full": _report(base / "b", "--model", "mixtral-8x7b", "--hw", "h200,h100-sxm", "--tp", "2", "--results", str(res), "--baseline", str(old)),
        "hostile": _report(base / "c", "--model", str(hostile_model_path)),
    }


@pytest.fixture(scope="module")
def hostile_model_path(tmp_path_factory):
    from test_report import HOSTILE, hostile_config

    d = tmp_path_factory.mktemp("hostile")
    p = d / "config.json"
    p.write_text(json.dumps(hostile_config()))
    assert HOSTILE in p.read_text()
    return p


def open_report(browser: Browser, path: Path) -> tuple[Page, dict]:
    page = browser.new_page()
    page.call("Runtime.enable")
    page.call("Log.enable")
    page.call("Network.enable")
    page.call("Page.enable")
    # a script the report might run would call one of these: record instead of blocking
    page.call("Page.addScriptToEvaluateOnNewDocument", source="window.__hostileRan=0;['alert','confirm','prompt'].forEach(function(f){window[f]=function(){window.__hostileRan++;};});")
    page.call("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False)
    page.call("Page.navigate", url=path.resolve().as_uri())
    page.wait_for("document.readyState === 'complete'", timeout=30)
    n_figs = page.evaluate("document.querySelectorAll('div.figure[data-fig]').length")
    page.wait_for(f"window.reportFiguresRendered + window.reportFigureErrors.length >= {n_figs}", timeout=40)
    info = page.evaluate(
        "JSON.stringify({figs: Array.from(document.querySelectorAll('div.figure[data-fig]')).map(function(d){var r=d.getBoundingClientRect();"
        "return {id: d.id, svg: d.querySelectorAll('.main-svg').length, traces: d.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,"
        "x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};}), "
        # each subplot's plot area (plotly's drag rectangle covers exactly the area inside the axes)
        "areas: Array.from(document.querySelectorAll('div.figure[data-fig] .nsewdrag')).map(function(a){var r=a.getBoundingClientRect();"
        "return {id: a.closest('div.figure').id, x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};}), "
        "errors: window.reportFigureErrors, hostile: window.__hostileRan})"
    )
    return page, json.loads(info)


def page_problems(page: Page) -> tuple[list[str], list[str]]:
    """(console errors and exceptions, URLs requested other than the file itself and data:)."""
    errors, requests = [], []
    for ev in page.events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            errors.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            errors.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not (url.startswith("file://") or url.startswith("data:") or url.startswith("blob:") or url == "about:blank"):
                requests.append(url)
        elif m == "Network.loadingFailed" and not p.get("canceled"):
            errors.append("network: " + p.get("errorText", ""))
    return errors, requests


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default", "full", "hostile"])
def test_report_renders_in_chromium(browser, reports, which):
    page, info = open_report(browser, reports[which])
    try:
        errors, requests = page_problems(page)
        assert not errors, errors
        assert not requests, f"the page requested other hosts: {requests}"
        assert not info["errors"], info["errors"]
        assert info["hostile"] == 0, "a script from the report's data ran"
        figs = info["figs"]
        expected = {"fig-roofline", "fig-breakdown", "fig-kv-vs-weights", "fig-memory-vs-batch", "fig-batch-sweep", "fig-attention-variants", "fig-moe"}
        if which == "full":
            expected |= {"fig-gpus", "fig-gpu-ceilings", "fig-validation"}
        assert {f["id"] for f in figs} == expected
        for f in figs:
            assert f["svg"] >= 1, f"{f['id']}: plotly drew no .main-svg"
            assert f["traces"] >= 1, f"{f['id']}: no trace drawn"
            assert f["w"] > 300 and f["h"] > 200, f
            shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                             clip={"x": f["x"], "y": f["y"], "width": f["w"], "height": f["h"], "scale": 0.25})
            frac = non_white_fraction(base64.b64decode(shot["data"]))
            assert frac > 0.02, f"{f['id']}: screenshot is blank ({frac:.1%} non-white pixels)"
        # axes, titles and legend alone pass the check above: each plot area (gridlines are lighter
        # than the threshold) must hold drawn data. Thinnest real case: one line, about 1.4%.
        assert {a["id"] for a in info["areas"]} == {f["id"] for f in figs}
        for a in info["areas"]:
            shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                             clip={"x": a["x"], "y": a["y"], "width": a["w"], "height": a["h"], "scale": 0.5})
            frac = non_white_fraction(base64.b64decode(shot["data"]))
            assert frac > 0.003, f"{a['id']}: a plot area is empty ({frac:.2%} non-white pixels)"
        if which == "hostile":
            from test_report import HOSTILE

            text = page.evaluate("document.body.innerText")
            assert HOSTILE in text, "the hostile name should be shown as text"
            assert page.evaluate("document.querySelectorAll('body script:not([type])').length") == 3  # plotly, loader, sort: ours only
            assert page.evaluate("document.querySelectorAll('img').length") == 0
        # the embedded data can be read back in the page itself
        assert page.evaluate("JSON.parse(document.getElementById('report-data').textContent).schema") == "rooflinecli.report/1"
    finally:
        page.ws.close()


def test_sortable_table_sorts_in_chromium(browser, reports):
    page, _ = open_report(browser, reports["default"])
    try:
        col = page.evaluate("Array.from(document.querySelectorAll('#ops-table thead th')).findIndex(function(th){return th.textContent==='time';})")
        assert col >= 0
        get = f"Array.from(document.querySelectorAll('#ops-table tbody tr')).map(function(r){{return parseFloat(r.cells[{col}].getAttribute('data-v'));}})"
        before = page.evaluate(get)
        page.evaluate(f"document.querySelectorAll('#ops-table thead th')[{col}].click()")
        asc = page.evaluate(get)
        page.evaluate(f"document.querySelectorAll('#ops-table thead th')[{col}].click()")
        desc = page.evaluate(get)
        assert sorted(before) == asc and asc != before
        assert desc == sorted(before, reverse=True)
    finally:
        page.ws.close()

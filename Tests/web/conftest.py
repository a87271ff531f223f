"""Fixtures of the browser tests: a real tabsync-server (from .build/debug) on an ephemeral port,
headless Chromium pages driven by Selenium, the `tabsync` one-shot client, and screenshots.

Everything waits on a condition with a deadline (WebDriverWait, or polling with one); no sleep
stands in for synchronisation.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import pytest
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("TABSYNC_BIN_DIR", os.path.join(ROOT, ".build", "debug"))
ARTIFACTS = os.environ.get("TABSYNC_WEB_ARTIFACTS", os.path.join(ROOT, ".build", "web-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT = 15  # seconds: the deadline of every wait (the machine is shared and slow)


def wait_for(predicate, timeout=WAIT, what="condition"):
    """Polls `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as error:  # noqa: BLE001 - retried until the deadline
            last = error
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class TabsyncServer:
    """A real tabsync-server process on its own SQLite data dir; killable and restartable on the
    same port and data, so a page that stays open sees one server go and come back."""

    def __init__(self, *extra):
        self.data = tempfile.mkdtemp(prefix="tabsync-web-")
        self.extra = list(extra)
        self.port = 0
        self.process = None
        self.start()

    def start(self):
        exe = os.path.join(BIN, "tabsync-server")
        if not os.access(exe, os.X_OK):
            raise RuntimeError(f"{exe} is not built: run swift build first")
        self.process = subprocess.Popen(
            [exe, "--host", "127.0.0.1", "--port", str(self.port), "--data-dir", self.data, "--log-level", "warning",
             "--idle-timeout", "10", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline()  # the server prints this one line once it listens
        if not line.startswith("listening on ws://"):
            self.process.kill()
            raise RuntimeError(f"tabsync-server did not start: {line!r}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        self.http_url = f"http://127.0.0.1:{self.port}"
        # Where a test opens the page: the server, or web/ from disk (DiskWebProxy).
        if os.environ.get("TABSYNC_WEB_FROM_DISK") == "1":
            if getattr(self, "proxy", None):
                self.proxy.upstream_http, self.proxy.upstream_ws = self.http_url, self.ws_url
            else:
                self.proxy = DiskWebProxy(self.http_url, self.ws_url)
            self.page_url = self.proxy.url
        else:
            self.page_url = self.http_url

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def restart(self):
        self.kill()
        self.start()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        if getattr(self, "proxy", None):
            self.proxy.stop()
            self.proxy = None
        shutil.rmtree(self.data, ignore_errors=True)

    def get(self, path):
        """(status, headers, body bytes) of a GET."""
        try:
            with urllib.request.urlopen(self.http_url + path, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def snapshot(self, workspace):
        status, _, body = self.get(f"/v1/workspaces/{workspace}")
        if status != 200:
            return None
        s = json.loads(body)
        return {"version": int(s.get("version", "0")), "ids": [t["id"] for t in s.get("tabs", [])],
                "tabs": s.get("tabs", []), "active": s.get("activeTabId", ""), "editable": s.get("editable", False)}

    def cli(self, workspace, *args, check=True):
        """Runs the `tabsync` one-shot client; returns its stdout (stripped)."""
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.data, "config"))
        result = subprocess.run(
            [os.path.join(BIN, "tabsync"), *args, "--server", self.ws_url, "--workspace", workspace,
             "--client-id", "cli-" + uuid.uuid4().hex[:8], "--name", "cli"],
            capture_output=True, text=True, timeout=30, env=env)
        if check and result.returncode != 0:
            raise AssertionError(f"tabsync {args} exited {result.returncode}: {result.stderr}")
        return result.stdout.strip() if check else result


class DiskWebProxy:
    """Serves the page from web/ on disk and relays its WebSocket sessions to a real server.

    The server embeds web/ when it is built (scripts/gen-web), so a prebuilt binary serves the
    page as it was then. With TABSYNC_WEB_FROM_DISK=1 the tests that open `server.page_url` get
    the page of this tree instead (its files, with the server's Content-Security-Policy), while
    every op still goes to the server. Off by default: scripts/test checks the embedded page.
    """

    TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
             ".js": "text/javascript; charset=utf-8"}

    def __init__(self, upstream_http, upstream_ws):
        import asyncio
        import threading
        self.upstream_http = upstream_http
        self.upstream_ws = upstream_ws
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError("the web proxy did not start")
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self, ready):
        import asyncio
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        ready.set()
        self.loop.run_forever()

    async def _start(self):
        from websockets.asyncio.server import serve
        self.server = await serve(self._relay, "127.0.0.1", 0, process_request=self._http,
                                  subprotocols=["tabsync.v1.json", "tabsync.v1.proto"], max_size=None)
        self.port = self.server.sockets[0].getsockname()[1]

    def _http(self, connection, request):
        from websockets.datastructures import Headers
        from websockets.http11 import Response
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return None
        path = request.path.split("?", 1)[0]
        web = os.path.join(ROOT, "web")
        if path == "/" or path.startswith("/w/"):
            name = "index.html"
        elif path.startswith("/web/") and "/" not in path[5:]:
            name = path[5:]
        else:
            status, headers, body = urllib_get(self.upstream_http + request.path)
            return Response(status, "", Headers([("Content-Type", headers.get("Content-Type", "text/plain"))]), body)
        file = os.path.join(web, name)
        if os.path.splitext(name)[1] not in self.TYPES or not os.path.isfile(file):
            return Response(404, "Not Found", Headers([("Content-Type", "text/plain")]), b"not found")
        # The server's headers for the same file, its body from disk.
        _, upstream_headers, _ = urllib_get(self.upstream_http + ("/" if name == "index.html" else "/web/bar.css"))
        headers = Headers([("Content-Type", self.TYPES[os.path.splitext(name)[1]]), ("Cache-Control", "no-cache")])
        for h in ("Content-Security-Policy", "X-Content-Type-Options"):
            if h in upstream_headers:
                headers[h] = upstream_headers[h]
        with open(file, "rb") as f:
            return Response(200, "OK", headers, f.read())

    async def _relay(self, connection):
        import asyncio
        from websockets.asyncio.client import connect
        async with connect(self.upstream_ws + connection.request.path, subprotocols=[connection.subprotocol],
                           max_size=None) as upstream:
            async def pump(source, sink):
                async for message in source:
                    await sink.send(message)
            tasks = [asyncio.create_task(pump(connection, upstream)), asyncio.create_task(pump(upstream, connection))]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in tasks:
                t.cancel()
            code = upstream.close_code if upstream.close_code and 1000 <= upstream.close_code < 5000 \
                and upstream.close_code not in (1005, 1006) else 1000
            await connection.close(code, upstream.close_reason or "")
            await upstream.close()

    def stop(self):
        import asyncio
        async def shutdown():
            self.server.close()
        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def urllib_get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.fixture
def server():
    s = TabsyncServer()
    yield s
    s.stop()


@pytest.fixture
def make_server():
    started = []

    def make(*extra):
        s = TabsyncServer(*extra)
        started.append(s)
        return s
    yield make
    for s in started:
        s.stop()


class Page:
    """One browser window on the bar, with helpers that read what it shows."""

    def __init__(self, driver, name):
        self.driver = driver
        self.name = name

    def open(self, url):
        self.driver.get(url)
        self.wait(lambda d: d.execute_script("return document.body.dataset.status") == "connected", "connected")
        return self

    def wait(self, predicate, what="condition", timeout=WAIT):
        # A re-render can replace an element between finding and reading it: look again.
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=[NoSuchElementException, StaleElementReferenceException]
                             ).until(predicate, message=f"{self.name}: {what}")

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def bar(self):
        """The order of tab ids shown, the active one, the confirmed version and pending count."""
        return self.js("""
            const tabs = [...document.querySelectorAll('#tabs .tab')];
            return { ids: tabs.map(e => e.dataset.id),
                     titles: tabs.map(e => e.querySelector('.title').textContent),
                     active: (tabs.find(e => e.getAttribute('aria-selected') === 'true') || {dataset: {}}).dataset.id || '',
                     version: Number(document.body.dataset.version),
                     pending: Number(document.body.dataset.pending),
                     status: document.body.dataset.status };""")

    def tab(self, tab_id):
        return self.driver.find_element("css selector", f'#tabs .tab[data-id="{tab_id}"]')

    def element_screenshot(self, element_id, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name + ".png")
        self.driver.find_element("id", element_id).screenshot(path)
        return path

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name + ".png")
        self.driver.save_screenshot(path)
        return path


def chrome(width=1100, height=640, dark=False):
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        raise RuntimeError(f"Chromium ({CHROMIUM}) or chromedriver ({CHROMEDRIVER}) is missing: "
                           "scripts/test installs Debian's chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars", "--force-device-scale-factor=1",
                "--lang=en-US", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    if dark:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    return driver


@pytest.fixture
def browser():
    drivers = []

    def make(name="page", **kwargs):
        driver = chrome(**kwargs)
        drivers.append(driver)
        return Page(driver, name)
    yield make
    for d in drivers:
        d.quit()

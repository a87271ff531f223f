"""Fixtures of the extension tests: the extension as scripts/package-extension assembles it, loaded
unpacked into headless Debian Chromium profiles (Selenium), a real tabsync-server (Tests/web's
TabsyncServer, allowing the extension's origin), a small HTTP server of test pages, the `tabsync`
CLI, and screenshots in .build/extension-artifacts/.

Every wait has a deadline; none stands in for synchronisation.
"""
import hashlib
import html
import importlib.util
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACTS = os.environ.get("TABSYNC_EXTENSION_ARTIFACTS", os.path.join(ROOT, ".build", "extension-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT = 20  # seconds: the deadline of every wait (the machine is shared and slow)

_spec = importlib.util.spec_from_file_location("web_conftest", os.path.join(ROOT, "Tests", "web", "conftest.py"))
web_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(web_conftest)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TabsyncServer(web_conftest.TabsyncServer):
    """Tests/web's server on a port chosen up front, allowing the extension's origin and the
    server's own page (a list replaces the loopback default, so both are listed, as a user does)."""

    def __init__(self, origin, *extra):
        self.preset_port = free_port()
        super().__init__("--allow-origin", origin, "--allow-origin", f"http://127.0.0.1:{self.preset_port}", *extra)

    def start(self):
        if not self.port:
            self.port = self.preset_port
        super().start()

    read_token = ""  # a token the test's own reads (snapshot, history) carry, when the server wants one

    def get(self, path):
        if not self.read_token:
            return super().get(path)
        import urllib.error
        import urllib.request
        request = urllib.request.Request(self.http_url + path, headers={"Authorization": f"Bearer {self.read_token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def backup(self, path):
        """`tabsync-server backup` of the served store to `path` (online, as an operator takes one)."""
        subprocess.run([os.path.join(web_conftest.BIN, "tabsync-server"), "backup", "--data-dir", self.data, "--to", str(path)],
                       capture_output=True, text=True, check=True)

    def restore_backup(self, path):
        """Stops the server (SIGTERM, as an operator does), replaces its data by the backup at `path`
        (docs/operating.md, "Restoring") and starts it again on the same port."""
        import shutil
        self.process.terminate()
        self.process.wait(timeout=WAIT)
        for name in os.listdir(self.data):
            full = os.path.join(self.data, name)
            if os.path.isfile(full) and name.startswith("tabsync.sqlite3"):
                os.remove(full)
        shutil.copyfile(path, os.path.join(self.data, "tabsync.sqlite3"))
        self.start()


class LoggedServer:
    """A tabsync-server whose info log is kept in a file, to count what reached it."""

    def __init__(self, origin, *extra):
        self.data = tempfile.mkdtemp(prefix="tabsync-ext-")
        self.log_path = os.path.join(self.data, "server.log")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [os.path.join(web_conftest.BIN, "tabsync-server"), "--host", "127.0.0.1", "--port", "0", "--memory",
                 "--log-level", "info", "--allow-origin", origin, *extra],
                stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on ws://"):
            self.process.kill()
            raise RuntimeError(f"tabsync-server did not start: {line!r}")
        self.ws_url = line.strip().split(" on ", 1)[1]

    def log_count(self, text):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read().count(text)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def wait_for(predicate, timeout=WAIT, what="condition"):
    """Polls `predicate` until it returns a truthy value or the deadline passes (the page tests'
    wait, with this suite's longer deadline: two browsers and a worker run here)."""
    return web_conftest.wait_for(predicate, timeout=timeout, what=what)


@pytest.fixture(scope="session")
def extension():
    """(unpacked dir, id) of the extension, assembled by scripts/package-extension. With
    TABSYNC_EXTENSION_TREE=DIR, by DIR's own packager from DIR's extension/ and web/ (another
    checkout, e.g. a `git worktree` of an older commit): the same tests and server against another
    extension, as scripts/compare-extension-latency does."""
    tree = os.environ.get("TABSYNC_EXTENSION_TREE", "")
    # A directory of each tree's own, so a comparison never repackages under the usual tests' feet.
    out = os.path.join(ROOT, ".build", "extension-test" + (f"-{hashlib.sha1(tree.encode()).hexdigest()[:8]}" if tree else ""))
    tree = tree or ROOT
    zip_path = out + ".zip"
    result = subprocess.run([os.path.join(tree, "scripts", "package-extension"), "--dir", out, "--zip", zip_path],
                            capture_output=True, text=True, check=True)
    fields = dict(line.split(": ", 1) for line in result.stdout.strip().splitlines())
    return {"dir": out, "id": fields["id"], "origin": fields["origin"], "zip": zip_path}


class Pages:
    """Test pages over HTTP: /p/NAME is a page titled NAME."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                name = urllib.parse.unquote(self.path.split("?", 1)[0].rsplit("/", 1)[-1])
                body = f"<!doctype html><title>{html.escape(name)}</title><h1>{html.escape(name)}</h1>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, name):
        return f"{self.base}/p/{urllib.parse.quote(name)}"


@pytest.fixture(scope="session")
def pages():
    p = Pages()
    yield p
    p.httpd.shutdown()


@pytest.fixture
def ext_server(extension):
    s = TabsyncServer(extension["origin"])
    yield s
    s.stop()


ASYNC = """
const done = arguments[arguments.length - 1];
(async () => { %s })().then((v) => done({ ok: v === undefined ? null : v }), (e) => done({ error: String(e && e.stack || e) }));
"""


def process_tree(root):
    """`root` and its descendants' pids, `root` first (from /proc, as a process list reads it)."""
    children = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(pid))
            except OSError:
                pass
    found, todo = [root], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


class Profile:
    """One Chromium profile with the extension loaded. Its first tab is the control page: the
    extension's popup (popup.html?window=ID) for the window under test; through it the test reads
    and drives the real tabs with the chrome.tabs API, as the user's clicks and drags would."""

    def __init__(self, name, extension):
        self.name = name
        self.ext = extension
        self.profile_dir = tempfile.mkdtemp(prefix=f"tabsync-ext-{name}-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=900,700", "--hide-scrollbars", "--force-device-scale-factor=1", "--lang=en-US",
                    "--no-first-run", f"--user-data-dir={self.profile_dir}",
                    f"--load-extension={extension['dir']}", f"--disable-extensions-except={extension['dir']}"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.service = Service(CHROMEDRIVER)
        self.driver = webdriver.Chrome(service=self.service, options=options)
        self.driver.set_script_timeout(WAIT)
        self.base = f"chrome-extension://{extension['id']}"
        self.control = None
        self.window = None
        wait_for(lambda: self._open_control(0), what=f"{name}: the extension's pages load")

    def _open_control(self, window_id):
        self.driver.get(f"{self.base}/popup.html?window={window_id}")
        return self.driver.execute_script("return typeof chrome !== 'undefined' && !!chrome.tabs")

    def run(self, body, *args):
        """Runs async JS `body` in the control page (chrome.* available); returns its value."""
        self.driver.switch_to.window(self.control or self.driver.current_window_handle)
        result = self.driver.execute_async_script(ASYNC % body, *args)
        if "error" in result:
            raise AssertionError(f"{self.name}: {result['error']}")
        return result["ok"]

    def new_window(self, urls):
        """Opens a normal window with `urls`; returns its id and makes the popup target it."""
        self.control = self.driver.current_window_handle
        window_id = self.run("return (await chrome.windows.create({ url: arguments[0], focused: false })).id;", urls)
        self.target(window_id)
        return window_id

    def target(self, window_id):
        """Points the control page (the popup) at `window_id`."""
        self.window = window_id
        self.driver.switch_to.window(self.control)
        self.driver.get(f"{self.base}/popup.html?window={window_id}")
        wait_for(lambda: self.driver.execute_script("return document.body.dataset.status") not in (None, "loading"),
                 what=f"{self.name}: the popup renders")

    def bind(self, server_url, workspace, name, mode="follow", token="", screenshot=None, remember=False):
        """Binds the targeted window by filling the popup's form, as a user does (a screenshot of
        the filled form first, when named)."""
        d = self.driver
        d.switch_to.window(self.control)
        for field, value in (("server", server_url), ("workspace", workspace), ("name", name), ("token", token)):
            el = d.find_element("id", field)
            el.clear()
            if value:
                el.send_keys(value)
        d.execute_script("document.getElementById('mode').value = arguments[0]; document.getElementById('remember').checked = arguments[1];",
                         mode, remember)
        if screenshot:
            self.screenshot(screenshot)
        d.find_element("id", "bind").click()

    def binding(self):
        """The worker's binding of this profile (one per profile in these tests), or None: a
        private window's is in storage.session only (docs/extension.md, "Binding rules")."""
        bindings = self.run("""const l = (await chrome.storage.local.get('bindings')).bindings || {};
                               const s = (await chrome.storage.session.get('privateBindings')).privateBindings || {};
                               return { ...l, ...s };""")
        return next(iter(bindings.values()), None)

    def status(self):
        b = self.binding()
        if not b:
            return None
        return self.run("const k = 'status:' + arguments[0]; return (await chrome.storage.session.get(k))[k] || null;", b["id"])

    def strip(self):
        """The bound window's tab strip as workspace ids: {ids, active, unmapped, titles, version, pending}."""
        b = self.binding()
        if not b:
            return None
        return self.run("""
            const b = arguments[0];
            const k = 'status:' + b.id;
            const s = (await chrome.storage.session.get(k))[k];
            if (!s) return null;
            const map = new Map(s.map);
            const tabs = (await chrome.tabs.query({ windowId: b.windowId })).sort((x, y) => x.index - y.index);
            return { window: b.windowId, status: s.status, version: s.version, pending: s.pending,
                     ids: tabs.filter((t) => !t.pinned).map((t) => map.get(t.id) || null),
                     active: map.get((tabs.find((t) => t.active) || {}).id) || null,
                     titles: tabs.map((t) => t.title), urls: tabs.map((t) => t.url),
                     chromeIds: tabs.map((t) => t.id) };""", b)

    def tab_of(self, ws_id):
        st = self.strip()
        return st["chromeIds"][st["ids"].index(ws_id)]

    def open_tab(self, url, active=True):
        b = self.binding()
        return self.run("return (await chrome.tabs.create({ windowId: arguments[0], url: arguments[1], active: arguments[2] })).id;",
                        b["windowId"], url, active)

    def close(self, ws_id):
        self.run("await chrome.tabs.remove(arguments[0]);", self.tab_of(ws_id))

    def move(self, ws_id, index):
        self.run("await chrome.tabs.move(arguments[0], { index: arguments[1] });", self.tab_of(ws_id), index)

    def activate(self, ws_id):
        self.run("await chrome.tabs.update(arguments[0], { active: true });", self.tab_of(ws_id))

    def retitle(self, ws_id, title, *more, gap_ms=50):
        """Sets document.title in the page of the tab, as the page itself would: `title`, then each
        of `more` `gap_ms` apart (one script in the page, so the gaps are the page's own)."""
        st = self.strip()
        url = st["urls"][st["ids"].index(ws_id)]
        d = self.driver
        try:
            for handle in d.window_handles:
                if handle == self.control:
                    continue
                d.switch_to.window(handle)
                if d.current_url == url:
                    d.execute_async_script(ASYNC % """
                        const [titles, gap] = arguments;
                        for (const [i, t] of titles.entries()) {
                          if (i > 0) await new Promise((r) => setTimeout(r, gap));
                          document.title = t;
                        }""", [title, *more], gap_ms)
                    return
            raise AssertionError(f"{self.name}: no page at {url}")
        finally:
            d.switch_to.window(self.control)

    def popup(self):
        """What the popup shows (its DOM, read as text)."""
        self.driver.switch_to.window(self.control)
        return self.driver.execute_script("""
            return { status: document.body.dataset.status, why: document.getElementById('why').hidden ? '' : document.getElementById('why').textContent,
                     error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
                     peers: [...document.querySelectorAll('#peers li')].map((e) => e.textContent),
                     tabs: [...document.querySelectorAll('#tabs li')].map((e) => e.textContent),
                     html: document.body.innerHTML };""")

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name + ".png")
        self.driver.switch_to.window(self.control)
        self.driver.set_window_size(420, 800)
        self.driver.find_element("tag name", "body").screenshot(path)  # the popup's own size
        return path

    def worker_running(self):
        """True while the extension's service worker runs (Chrome lists it as a target)."""
        targets = self.driver.execute_cdp_cmd("Target.getTargets", {})["targetInfos"]
        return any(t["type"] == "service_worker" and t["url"].startswith(self.base) for t in targets)

    def memory_kib(self):
        """Proportional set size of this browser's processes (chromedriver's descendants), in KiB."""
        total = 0
        for pid in process_tree(self.root_pid())[1:]:
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
            except (OSError, StopIteration):
                pass
        return total

    def root_pid(self):
        return self.service.process.pid

    def quit(self):
        try:
            self.driver.quit()
        finally:
            subprocess.run(["rm", "-rf", self.profile_dir], check=False)


class CdpProfile(Profile):
    """A profile driven over the DevTools protocol, without chromedriver: chromedriver attaches to
    the extension's service worker, and an attached worker is never stopped for idling. Here only
    the control page is attached, so Chrome stops the idle worker as it does for a user."""

    def __init__(self, name, extension):
        self.name = name
        self.ext = extension
        self.profile_dir = tempfile.mkdtemp(prefix=f"tabsync-ext-{name}-")
        self.launch()

    def restart(self):
        """Closes the browser as a user does (Browser.close, the session saved) and starts it again
        on the same profile, restoring the last session."""
        self.shut()
        self.launch("--restore-last-session")

    def shut(self):
        """Closes the browser as a user does (Browser.close, the session saved); `launch("--restore-last-session")`
        starts it again."""
        try:
            self.cdp("Browser.close")
        except Exception:  # noqa: BLE001 - the connection may close before the reply
            pass
        self.process.wait(timeout=WAIT)
        self.ws.close()

    def launch(self, *extra):
        import itertools
        import re
        from websockets.sync.client import connect
        extension = self.ext
        name = self.name
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
             "--window-size=900,700", "--lang=en-US", f"--user-data-dir={self.profile_dir}", "--remote-debugging-port=0",
             f"--load-extension={extension['dir']}", f"--disable-extensions-except={extension['dir']}", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + WAIT
        url = None
        while url is None and time.monotonic() < deadline:
            match = re.search(r"(ws://\S+)", self.process.stderr.readline())
            url = match and match.group(1)
        if not url:
            raise RuntimeError(f"{name}: Chromium printed no DevTools address")
        self.process.stderr.close()
        self.ws = connect(url, max_size=None, open_timeout=WAIT).__enter__()  # closed in quit()
        self.ids = itertools.count(1)
        self.base = f"chrome-extension://{extension['id']}"
        self.window = None
        self.control = None
        self.session = None
        self._open_control(0)

    def cdp(self, method, session=None, **params):
        i = next(self.ids)
        message = {"id": i, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv(timeout=WAIT))
            if reply.get("id") == i:
                if "error" in reply:
                    raise AssertionError(f"{self.name}: {method}: {reply['error']}")
                return reply["result"]

    def _attach(self, target_id):
        return self.cdp("Target.attachToTarget", targetId=target_id, flatten=True)["sessionId"]

    def _evaluate(self, session, expression):
        result = self.cdp("Runtime.evaluate", session, expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{self.name}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def _open_control(self, window_id):
        url = f"{self.base}/popup.html?window={window_id}"
        if self.session is None:
            # In a window of its own: never a tab of a window under test.
            self.control = self.cdp("Target.createTarget", url=url, newWindow=True)["targetId"]
            self.session = self._attach(self.control)
        else:
            self.cdp("Page.navigate", self.session, url=url)
        ready = f"location.href === {json.dumps(url)} && document.readyState === 'complete' && typeof chrome !== 'undefined' && !!chrome.tabs"
        wait_for(lambda: self._evaluate(self.session, ready), what=f"{self.name}: {url} loads")
        return True

    def run(self, body, *args):
        value = self._evaluate(self.session, f"(async function () {{ {body} }}).apply(null, {json.dumps(list(args))})")
        return value

    def new_window(self, urls):
        window_id = self.run("return (await chrome.windows.create({ url: arguments[0], focused: false })).id;", urls)
        self.target(window_id)
        return window_id

    def target(self, window_id):
        self.window = window_id
        self._open_control(window_id)
        wait_for(lambda: self.run("return document.body.dataset.status") not in (None, "loading"), what=f"{self.name}: the popup renders")

    def bind(self, server_url, workspace, name, mode="follow", token="", screenshot=None, remember=False, incognito=False):
        self.run("""const [server, workspace, name, token, mode, remember, incognito] = arguments;
                    Object.entries({ server, workspace, name, token, mode }).forEach(([k, v]) => { document.getElementById(k).value = v; });
                    document.getElementById('remember').checked = remember;
                    document.getElementById('incognito').checked = incognito;""",
                 server_url, workspace, name, token, mode, remember, incognito)
        if screenshot:
            self.screenshot(screenshot)
        self.run("document.getElementById('bind').click();")

    def retitle(self, ws_id, title):
        st = self.strip()
        url = st["urls"][st["ids"].index(ws_id)]
        target = next(t for t in self.cdp("Target.getTargets")["targetInfos"] if t["type"] == "page" and t["url"] == url)
        session = self._attach(target["targetId"])
        self._evaluate(session, f"document.title = {json.dumps(title)}")
        self.cdp("Target.detachFromTarget", sessionId=session)

    def popup(self):
        return self.run("""return { status: document.body.dataset.status,
                     why: document.getElementById('why').hidden ? '' : document.getElementById('why').textContent,
                     peers: [...document.querySelectorAll('#peers li')].map((e) => e.textContent),
                     tabs: [...document.querySelectorAll('#tabs li')].map((e) => e.textContent) };""")

    def worker_running(self):
        targets = self.cdp("Target.getTargets")["targetInfos"]
        return any(t["type"] == "service_worker" and t["url"].startswith(self.base) for t in targets)

    def screenshot(self, name):
        import base64
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name + ".png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.cdp("Page.captureScreenshot", self.session)["data"]))
        return path

    def root_pid(self):
        return self.process.pid

    def quit(self):
        try:
            self.ws.close()
            self.process.terminate()
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001 - the browser is going anyway
            self.process.kill()
        finally:
            subprocess.run(["rm", "-rf", self.profile_dir], check=False)


@pytest.fixture
def profiles(extension):
    made = []

    def make(name, cdp=False):
        p = (CdpProfile if cdp else Profile)(name, extension)
        made.append(p)
        return p
    yield make
    for p in made:
        p.quit()


def converged(server, workspace, *profiles, follow=True):
    """True when the server's snapshot equals every profile's tab strip (ids, order, active) and
    nothing is pending."""
    snap = server.snapshot(workspace)
    if snap is None:
        return False
    for p in profiles:
        st = p.strip()
        if not st or st["status"] != "connected" or st["pending"] != 0 or st["version"] != snap["version"]:
            return False
        if st["ids"] != snap["ids"]:
            return False
        if follow and st["active"] != snap["active"]:
            return False
    return snap


def write_artifact(name, data):
    os.makedirs(ARTIFACTS, exist_ok=True)
    with open(os.path.join(ARTIFACTS, name), "w") as f:
        json.dump(data, f, indent=2)


@pytest.fixture
def browser_page():
    """A plain headless Chromium page (no extension): the server's own web page as a viewer."""
    drivers = []

    def make(url):
        d = web_conftest.chrome()
        drivers.append(d)
        d.get(url)
        return d
    yield make
    for d in drivers:
        d.quit()


def submit(server, workspace, op, token=None):
    """Submits one op as a program would (the Python client package, clients/python); returns its
    Applied."""
    return submit_all(server, workspace, [op], token=token)[-1]


def submit_all(server, workspace, ops, token=None):
    """Submits `ops` in order as one session of the Python client package (with `token` where the
    server wants one); returns their Applieds. A refusal fails the test."""
    import asyncio
    import sys
    sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
    from tabsync_client import Refused, Session

    async def run():
        url = f"{server.ws_url}/v1/workspaces/{urllib.parse.quote(workspace, safe='')}/ws"
        session = Session(url, workspace, client_id="py-" + os.urandom(4).hex(), token=token)
        await session.start(timeout=10)
        try:
            futures = [session.submit(op) for op in ops]
            return [await asyncio.wait_for(f, 10) for f in futures]
        except Refused as refusal:
            raise AssertionError(f"refused: {refusal}") from None
        finally:
            await session.close()

    return asyncio.run(run())

"""A Firefox ESR profile with the extension, driven over Firefox's own Marionette protocol.

Debian has no geckodriver and none can be downloaded here; Firefox speaks Marionette itself when
started with `--marionette`. The protocol is small (TCP, each message `LENGTH:JSON`, a command
`[0, id, name, params]`, its answer `[1, id, error, result]`), so it is spoken here directly in
about 60 lines rather than through Mozilla's `marionette-driver` package: no extra dependency,
nothing between the test and the browser, and each command the tests use is visible below.
(WebDriver BiDi, Firefox's other built-in protocol, refuses to navigate to `moz-extension://`.)

`FirefoxProfile` is a conftest `Profile`: what reads the extension through its own `chrome.*` calls
(`binding`, `status`, `tab_of`, `open_tab`, `close`, `move`, `activate`) is the Chromium profile's,
and it overrides what talks to the browser itself (starting it, `run`, the control page, `bind`,
`strip` with Firefox's containers, `popup`, `screenshot`, `memory_kib`, `quit`), so the scenario's
steps and `converged` read both browsers alike.
Its control page is the extension's popup (`popup.html?window=ID`), opened as a tab of a window of
its own through Marionette's chrome context; scripts run in it with `chrome.*` available, as in
Chromium.

The extension is installed as a temporary add-on (from the `.xpi` that
`scripts/package-extension --browser firefox` makes), its `moz-extension://` UUID pinned by the
profile's `extensions.webextensions.uuids` preference. Firefox is kept off the network: the
environment's `MOZ_DISABLE_NONLOCAL_CONNECTIONS=1` stops any non-loopback connection (a proxy or a
PAC in the profile would also stop its loopback WebSockets), and the prefs below turn off its own
update, telemetry and safe-browsing traffic.
"""
import base64
import itertools
import json
import os
import socket
import subprocess
import tempfile
import time
import uuid

from conftest import ARTIFACTS, WAIT, Profile, process_tree, wait_for

FIREFOX = os.environ.get("FIREFOX", "/usr/bin/firefox-esr")

PREFS = {
    "marionette.port": 0,  # any free port: Firefox writes it to MarionetteActivePort in the profile
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.startup.page": 0,
    "browser.aboutwelcome.enabled": False,
    "browser.newtabpage.enabled": False,
    "browser.newtabpage.activity-stream.feeds.system.topstories": False,
    "browser.newtabpage.activity-stream.feeds.snippets": False,
    "browser.tabs.warnOnClose": False,
    "browser.warnOnQuit": False,
    "browser.sessionstore.resume_from_crash": False,
    "toolkit.startup.max_resumed_crashes": -1,
    "app.update.enabled": False,
    "app.update.auto": False,
    "app.normandy.enabled": False,
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "extensions.systemAddon.update.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.blockedURIs.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "services.settings.server": "http://127.0.0.1:9/",  # remote settings: nowhere
    "browser.region.network.url": "",
    "geo.provider.network.url": "",
    "privacy.userContext.enabled": True,  # containers
    "ui.prefersReducedMotion": 1,
    "layout.css.devPixelsPerPx": "1.0",
}


class Marionette:
    """Firefox's Marionette protocol over TCP."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.buffer = b""
        self.ids = itertools.count(1)
        self._read()  # the server's hello: {"applicationType": "gecko", "marionetteProtocol": 3}

    def _read(self):
        while b":" not in self.buffer:
            self._fill()
        length, _, rest = self.buffer.partition(b":")
        size = int(length)
        self.buffer = rest
        while len(self.buffer) < size:
            self._fill()
        message, self.buffer = self.buffer[:size], self.buffer[size:]
        return json.loads(message)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("Marionette closed the connection")
        self.buffer += chunk

    def call(self, name, params=None, timeout=WAIT):
        i = next(self.ids)
        data = json.dumps([0, i, name, params or {}]).encode()
        self.sock.settimeout(timeout)
        self.sock.sendall(str(len(data)).encode() + b":" + data)
        while True:
            kind, rid, error, result = self._read()
            if kind == 1 and rid == i:
                if error:
                    raise AssertionError(f"Marionette {name}: {error.get('error')}: {error.get('message')}")
                return result

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


ASYNC = """
const done = arguments[arguments.length - 1];
(async () => { %s })().then((v) => done({ ok: v === undefined ? null : v }), (e) => done({ error: String(e && e.stack || e) }));
"""


# Browser-context helpers: the browser window of an extension window id, and tab ids as the extension sees them.
WINDOW_OF = """
const { ExtensionParent } = ChromeUtils.importESModule("resource://gre/modules/ExtensionParent.sys.mjs");
const { tabTracker, windowTracker } = ExtensionParent.apiManager.global;
const windowOf = (id) => { for (const w of Services.wm.getEnumerator("navigator:browser")) if (windowTracker.getId(w) === id) return w; throw new Error("no window " + id); };
"""


class FirefoxProfile(Profile):
    """One Firefox ESR profile with the extension installed, driven over Marionette."""

    def __init__(self, name, xpi, gecko_id, restartable=False):
        """`restartable`: the extension is installed for good (an unsigned add-on, which ESR allows
        with `xpinstall.signatures.required` off) rather than as a temporary add-on, which Firefox
        removes when it closes, and Firefox restores its last session when started (`restart`)."""
        self.name = name
        self.xpi = xpi
        self.restartable = restartable
        self.uuid = str(uuid.uuid4())
        self.base = f"moz-extension://{self.uuid}"
        self.origin = self.base
        self.profile_dir = tempfile.mkdtemp(prefix=f"tabsync-ext-ff-{name}-")
        prefs = dict(PREFS, **{"extensions.webextensions.uuids": json.dumps({gecko_id: self.uuid})})
        if restartable:
            prefs.update({"xpinstall.signatures.required": False, "browser.startup.page": 3,
                          "browser.sessionstore.resume_session_once": False})
        with open(os.path.join(self.profile_dir, "user.js"), "w") as f:
            for key, value in prefs.items():
                f.write(f"user_pref({json.dumps(key)}, {json.dumps(value)});\n")
        self.log = open(os.path.join(self.profile_dir, "firefox.log"), "wb")
        self.launch(["about:blank"])
        self.m.call("Addon:Install", {"path": xpi, "temporary": not restartable})
        self._open_control(0)

    def launch(self, args):
        """Starts Firefox on this profile (`args` after the profile: a page to show, or none when a
        restored session is wanted) and opens a Marionette session."""
        env = dict(os.environ, MOZ_DISABLE_NONLOCAL_CONNECTIONS="1", MOZ_CRASHREPORTER_DISABLE="1",
                   MOZ_HEADLESS_WIDTH="900", MOZ_HEADLESS_HEIGHT="700")
        port_file = os.path.join(self.profile_dir, "MarionetteActivePort")
        if os.path.exists(port_file):
            os.remove(port_file)  # the last run's port: wait for this run's
        self.process = subprocess.Popen(
            [FIREFOX, "--headless", "--marionette", "-remote-allow-system-access", "-no-remote",
             "--profile", self.profile_dir, *args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        port = wait_for(lambda: os.path.exists(port_file) and int(open(port_file).read().strip() or 0), timeout=60,
                        what=f"{self.name}: Firefox's Marionette port")
        self.m = wait_for(lambda: Marionette(port), what=f"{self.name}: Marionette answers")
        self.m.call("WebDriver:NewSession", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": True}}}, timeout=60)
        self.m.call("WebDriver:SetTimeouts", {"script": WAIT * 1000})
        self.window = None
        self.control = None

    def restart(self):
        """Closes Firefox as a user does (File > Quit: the session is written on the way out) and
        starts it again on its profile, which restores that session (a `restartable` profile)."""
        assert self.restartable, "a temporary add-on does not survive a restart"
        try:
            self.m.call("Marionette:Quit", {"flags": ["eAttemptQuit"]}, timeout=WAIT)
        except (AssertionError, ConnectionError, OSError):  # the connection may close before the reply
            pass
        self.m.close()
        self.process.wait(timeout=2 * WAIT)
        self.launch([])
        self._restore_control()

    def _restore_control(self):
        """After a restart: the session restored the control tab (in the first window, never a
        window under test); it is loaded again with the popup page, in place, and no other tab is
        touched (a user's restored tabs are never closed by the harness)."""
        url = f"{self.base}/popup.html?window=0"
        prefix = f"{self.base}/popup.html"
        found = wait_for(lambda: self.chrome_script("""
            const [prefix, url] = arguments;
            for (const w of Services.wm.getEnumerator("navigator:browser")) {
              if (!w.gBrowser) continue;
              for (const tab of w.gBrowser.tabs) {
                const spec = tab.linkedBrowser.currentURI?.spec ?? "";
                const lazy = w.SessionStore?.getLazyTabValue?.(tab, "url") ?? "";
                if (!spec.startsWith(prefix) && !lazy.startsWith(prefix)) continue;
                w.gBrowser.selectedTab = tab;
                tab.linkedBrowser.loadURI(Services.io.newURI(url), { triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal() });
                return true;
              }
            }
            return false;""", prefix, url), timeout=2 * WAIT, what=f"{self.name}: the restored control tab")
        assert found
        self.control = wait_for(lambda: self._control_handle(url), what=f"{self.name}: the control tab")
        self.m.call("WebDriver:SwitchToWindow", {"handle": self.control, "focus": False})
        wait_for(lambda: self._script(f"return location.href === {json.dumps(url)} && document.readyState === 'complete' "
                                      "&& typeof chrome !== 'undefined' && !!chrome.tabs"),
                 what=f"{self.name}: {url} loads")

    # --- chrome (browser UI) context

    def chrome_script(self, body, *args):
        """Runs `body` in the browser's own (privileged) context, in the control page's window."""
        self.m.call("Marionette:SetContext", {"value": "chrome"})
        try:
            return self.m.call("WebDriver:ExecuteScript", {"script": body, "args": list(args)})["value"]
        finally:
            self.m.call("Marionette:SetContext", {"value": "content"})

    def _open_control(self, window_id):
        """Shows the popup page for `window_id` in the control tab (a tab of the first window, which
        is never a window under test). A moz-extension:// page can only be opened from the browser's
        own context, with the system principal."""
        url = f"{self.base}/popup.html?window={window_id}"
        if self.control is None:
            self.chrome_script("""
                const tab = gBrowser.addTab(arguments[0], { triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal() });
                const old = gBrowser.selectedTab;
                gBrowser.selectedTab = tab;
                if (old !== tab) gBrowser.removeTab(old);""", url)
            self.control = wait_for(lambda: self._control_handle(url), what=f"{self.name}: the control tab")
            self.m.call("WebDriver:SwitchToWindow", {"handle": self.control, "focus": False})
        else:
            # The page loading now is marked as the old one: a load of the URL it already shows
            # keeps the old document (its href, its readyState "complete") until the new one
            # commits, and a script run meanwhile is unloaded under it (Marionette answers null).
            self._script("window.tabsyncOldPage = true;")
            self._load_control(url)
        wait_for(lambda: self._script(f"return location.href === {json.dumps(url)} && document.readyState === 'complete' "
                                      "&& typeof chrome !== 'undefined' && !!chrome.tabs && !window.tabsyncOldPage"),
                 what=f"{self.name}: {url} loads")
        return True

    def _load_control(self, url):
        """Loads `url` in the control tab, from the browser's own context (the system principal may
        load any page, moz-extension:// included)."""
        self.m.call("WebDriver:SwitchToWindow", {"handle": self.control, "focus": False})
        self.chrome_script("""gBrowser.selectedBrowser.loadURI(Services.io.newURI(arguments[0]),
            { triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal() });""", url)

    def _control_handle(self, url):
        for handle in self.m.call("WebDriver:GetWindowHandles"):
            self.m.call("WebDriver:SwitchToWindow", {"handle": handle, "focus": False})
            if self.m.call("WebDriver:GetCurrentURL")["value"] == url:
                return handle
        return None

    def _script(self, body):
        self.m.call("WebDriver:SwitchToWindow", {"handle": self.control, "focus": False})
        return self.m.call("WebDriver:ExecuteScript", {"script": body})["value"]

    # --- the control page (the popup)

    def run(self, body, *args):
        """Runs async JS `body` in the control page (chrome.* available); returns its value."""
        for _ in range(2):
            self.m.call("WebDriver:SwitchToWindow", {"handle": self.control, "focus": False})
            try:
                result = self.m.call("WebDriver:ExecuteAsyncScript", {"script": ASYNC % body, "args": list(args)},
                                     timeout=WAIT + 5)["value"]
            except AssertionError as error:
                if "Document was unloaded" not in str(error):
                    raise
                result = None
            if result is not None:
                break
            # Marionette answers null, or "Document was unloaded", when the control page was
            # unloaded under the script: `target` reloading the URL the page already showed (seen in
            # 20-minute chaos runs just after a Try again or a Bind; now waited for as a new document
            # in `_open_control`). The page is waited for and the script run once more. A control tab
            # navigated to any other page would be sync touching a tab of a window it is not bound
            # to: that fails, naming the page.
            def loaded_again():
                href = self._script("return location.href")
                if not href.startswith(self.base):
                    raise AssertionError(f"{self.name}: the control tab (in no bound window) was navigated to {href}")
                return self._script("return document.readyState === 'complete' && typeof chrome !== 'undefined' && !!chrome.tabs")
            wait_for(loaded_again, what=f"{self.name}: the control page loaded again")
        else:
            raise AssertionError(f"{self.name}: the control page was unloaded under a script twice")
        if "error" in result:
            raise AssertionError(f"{self.name}: {result['error']}")
        return result["ok"]

    def new_window(self, urls):
        window_id = self.run("return (await chrome.windows.create({ url: arguments[0], focused: false })).id;", urls)
        self.target(window_id)
        return window_id

    def target(self, window_id):
        self.window = window_id
        self._open_control(window_id)
        wait_for(lambda: self.run("return document.body.dataset.status") not in (None, "loading"),
                 what=f"{self.name}: the popup renders")

    def bind(self, server_url, workspace, name, mode="follow", token="", screenshot=None):
        self.run("""const [server, workspace, name, token, mode] = arguments;
                    Object.entries({ server, workspace, name, token, mode }).forEach(([k, v]) => { document.getElementById(k).value = v; });""",
                 server_url, workspace, name, token, mode)
        if screenshot:
            self.screenshot(screenshot)
        self.run("document.getElementById('bind').click();")

    def strip(self):
        """The bound window's tab strip as workspace ids (as conftest's Profile.strip), plus each
        tab's container (`cookieStoreIds`) and whether it is discarded."""
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
                     chromeIds: tabs.map((t) => t.id), cookieStoreIds: tabs.map((t) => t.cookieStoreId),
                     discarded: tabs.map((t) => !!t.discarded), connections: s.connections ?? null };""", b)

    def open_container_tab(self, url, user_context_id=1):
        """Opens `url` in container `user_context_id` (Firefox's default "Personal" is 1) at the end
        of the bound window, as a user does from the new-tab button's menu. Through the browser's
        own context: `tabs.create({cookieStoreId})` needs the "cookies" permission, which the
        extension does not ask for."""
        b = self.binding()
        return self.chrome_script(WINDOW_OF + """
            const [url, windowId, userContextId] = arguments;
            const win = windowOf(windowId);
            const tab = win.gBrowser.addTab(url, { userContextId, triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal() });
            return tabTracker.getId(tab);""", url, b["windowId"], user_context_id)

    def watch_activations(self, window_id):
        """Records each tab selection in window `window_id` with its Date.now(), from the browser's own
        code (no extension page, event or API call involved: it does not keep the event page alive)."""
        self.chrome_script(WINDOW_OF + """
            const win = windowOf(arguments[0]);
            win.tabsyncActivations = [];
            win.gBrowser.tabContainer.addEventListener("TabSelect", (e) =>
              win.tabsyncActivations.push({ tab: tabTracker.getId(e.target), t: Date.now() }));""", window_id)
        self.watched = window_id

    def activations(self):
        return self.chrome_script(WINDOW_OF + "return windowOf(arguments[0]).tabsyncActivations;", self.watched)

    def leave_control(self):
        """Shows about:blank in the control tab: no extension page stays open."""
        self._load_control("about:blank")

    def reopen_control(self):
        self._open_control(self.window or 0)

    def navigate(self, ws_id, url):
        self.run("await chrome.tabs.update(arguments[0], { url: arguments[1] });", self.tab_of(ws_id), url)

    def popup(self):
        return self.run("""return { status: document.body.dataset.status,
                     why: document.getElementById('why').hidden ? '' : document.getElementById('why').textContent,
                     error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
                     peers: [...document.querySelectorAll('#peers li')].map((e) => e.textContent),
                     tabs: [...document.querySelectorAll('#tabs li')].map((e) => e.textContent) };""")

    def screenshot(self, name):
        """The popup's body, as Firefox draws it (Marionette's element screenshot)."""
        os.makedirs(ARTIFACTS, exist_ok=True)
        path = os.path.join(ARTIFACTS, name + ".png")
        self.m.call("WebDriver:SwitchToWindow", {"handle": self.control, "focus": False})
        self.m.call("WebDriver:SetWindowRect", {"width": 420, "height": 800})
        body = self.m.call("WebDriver:FindElement", {"using": "css selector", "value": "body"})["value"]
        element = next(iter(body.values())) if isinstance(body, dict) else body  # {WEB_ELEMENT or "ELEMENT": id}
        data = self.m.call("WebDriver:TakeScreenshot", {"id": element, "full": False, "hash": False})["value"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def pids(self):
        """Firefox's processes: the parent and its descendants (content, extension, GPU, ...)."""
        return process_tree(self.process.pid)

    def memory(self):
        """{rss_kib, pss_kib, by_type: {type: {rss_kib, pss_kib, processes}}} of Firefox's processes,
        each typed as Firefox's own process list has it (parent, extension, web, ...)."""
        try:
            types = dict(self.chrome_script("""return ChromeUtils.requestProcInfo().then((info) =>
                info.children.map((c) => [String(c.pid), c.type]));"""))
        except AssertionError:
            types = {}
        total = {"rss_kib": 0, "pss_kib": 0, "by_type": {}}
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    fields = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[-1] == "kB"}
            except (OSError, ValueError):
                continue
            kind = "parent" if pid == self.process.pid else types.get(str(pid), "other")
            entry = total["by_type"].setdefault(kind, {"rss_kib": 0, "pss_kib": 0, "processes": 0})
            for key, field in (("rss_kib", "Rss"), ("pss_kib", "Pss")):
                entry[key] += fields.get(field, 0)
                total[key] += fields.get(field, 0)
            entry["processes"] += 1
        return total

    def memory_kib(self):
        return self.memory()["pss_kib"]

    def quit(self):
        try:
            try:
                self.m.call("Marionette:Quit", {"flags": ["eForceQuit"]}, timeout=10)
            except Exception:  # noqa: BLE001 - the connection closes as Firefox goes
                pass
            self.m.close()
            self.process.wait(timeout=20)
        except Exception:  # noqa: BLE001 - the browser is going anyway
            self.process.kill()
            self.process.wait(timeout=10)
        finally:
            self.log.close()
            subprocess.run(["rm", "-rf", self.profile_dir], check=False)

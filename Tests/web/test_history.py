"""The History drawer of the page against a real tabsync-server, in headless Chromium: the
timeline (who did what when, paged with Older), Restore to here with its inline confirm, the
recently closed tabs with Reopen, and the server's refusals shown in the drawer.

With a prebuilt server whose embedded page is older than web/, run with TABSYNC_WEB_FROM_DISK=1
(conftest.DiskWebProxy). Screenshots go to .build/web-artifacts/.
"""
import json

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import wait_for


def state_at(server, workspace, version):
    status, _, body = server.get(f"/v1/workspaces/{workspace}?version={version}")
    assert status == 200, body
    return json.loads(body)


def current(server, workspace):
    status, _, body = server.get(f"/v1/workspaces/{workspace}")
    assert status == 200, body
    return json.loads(body)


def same_state(a, b):
    """Tabs (ids, fields and keys), active tab and editable equal: what a restore puts back."""
    return a.get("tabs", []) == b.get("tabs", []) and a.get("activeTabId", "") == b.get("activeTabId", "") \
        and a.get("editable", False) == b.get("editable", False)


def open_drawer(page):
    page.driver.find_element(By.ID, "history-toggle").click()
    page.wait(lambda d: d.find_element(By.ID, "history").is_displayed(), "drawer open")


def timeline_versions(page):
    return page.js("return [...document.querySelectorAll('#timeline li[data-version]')].map(e => Number(e.dataset.version))")


def test_restore_to_here_puts_the_workspace_back_as_it_was(server, browser):
    ws = "restore"
    alpha = server.cli(ws, "add", "--title", "Alpha", "--url", "https://alpha.example/")
    bravo = server.cli(ws, "add", "--title", "Bravo", "--url", "https://bravo.example/")
    server.cli(ws, "add", "--title", "Charlie")
    server.cli(ws, "activate", bravo)
    target = current(server, ws)
    version = int(target["version"])
    # Then it changes: a tab closed, one renamed, one added, another moved.
    server.cli(ws, "rm", bravo)
    server.cli(ws, "rename", alpha, "Alpha renamed")
    server.cli(ws, "add", "--title", "Delta")
    server.cli(ws, "mv", alpha, "3")
    assert not same_state(current(server, ws), target)

    page = browser("history", width=1200, height=760).open(f"{server.page_url}/w/{ws}?name=alice")
    page.element_screenshot("bar-shell", "bar-with-history-button")
    open_drawer(page)
    page.wait(lambda d: len(timeline_versions(page)) == 8, "eight entries")
    assert timeline_versions(page) == list(range(8, 0, -1))  # newest first
    # Each entry says what, who and when.
    entry = page.driver.find_element(By.CSS_SELECTOR, f'#timeline li[data-version="{version}"]')
    assert entry.find_element(By.CSS_SELECTOR, ".summary").text
    assert "cli" in entry.find_element(By.CSS_SELECTOR, ".entry-meta").text
    assert "ago" in entry.find_element(By.CSS_SELECTOR, ".when").text or "just now" in entry.text
    # The newest is marked "now", with nothing to restore.
    newest = page.driver.find_element(By.CSS_SELECTOR, '#timeline li[data-version="8"]')
    assert not newest.find_elements(By.CSS_SELECTOR, "button") and "NOW" in newest.text.upper()

    # Restore to here asks first; Cancel leaves everything as it is.
    entry.find_element(By.CSS_SELECTOR, '[data-action="restore"]').click()
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, f'#timeline li[data-version="{version}"] .confirm'), "confirm shown")
    page.driver.find_element(By.CSS_SELECTOR, '[data-action="cancel-restore"]').click()
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, ".confirm"), "confirm gone")
    assert int(current(server, ws)["version"]) == 8
    page.driver.find_element(By.CSS_SELECTOR, f'#timeline li[data-version="{version}"] [data-action="restore"]').click()
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, ".confirm"), "confirm shown again")
    page.screenshot("history-drawer-confirm")
    page.element_screenshot("history", "history-drawer")
    page.driver.find_element(By.CSS_SELECTOR, '[data-action="confirm-restore"]').click()

    wait_for(lambda: same_state(current(server, ws), target), what="the workspace is as it was at the version")
    now = current(server, ws)
    assert int(now["version"]) == 9  # a new version: history is not rewritten
    assert same_state(now, state_at(server, ws, version))
    # The page shows it: the restored order and active tab, nothing pending, the note, a new entry.
    wait_for(lambda: page.bar()["ids"] == [t["id"] for t in target["tabs"]] and page.bar()["pending"] == 0
             and page.bar()["active"] == target["activeTabId"] and page.bar()["version"] == 9, what="page restored")
    page.wait(lambda d: f"Restored to v{version}" in d.find_element(By.ID, "history-note").text, "note")
    page.wait(lambda d: timeline_versions(page)[:1] == [9], "the restore in the timeline")
    page.screenshot("history-drawer-restored")


def test_reopen_brings_a_closed_tab_back_with_its_title_and_url(server, browser):
    ws = "reopen"
    keep = server.cli(ws, "add", "--title", "Keep", "--url", "https://keep.example/")
    gone = server.cli(ws, "add", "--title", "Manual 🚀", "--url", "https://docs.example/manual?x=1")
    server.cli(ws, "add", "--title", "After")
    server.cli(ws, "rm", gone)
    page = browser("reopen", width=1200, height=760, dark=True).open(f"{server.page_url}/w/{ws}?name=bob")
    assert gone not in page.bar()["ids"]
    open_drawer(page)
    item = page.wait(lambda d: d.find_element(By.CSS_SELECTOR, f'#closed-list li[data-id="{gone}"]'), "closed tab listed")
    assert "Manual 🚀" in item.text and "https://docs.example/manual?x=1" in item.text and "cli" in item.text
    # The timeline names the closed tab by its title, not its id (the server's summary is kept as a tooltip).
    summary = page.wait(lambda d: d.find_element(By.CSS_SELECTOR, '#timeline li[data-version="4"] .summary'), "entry")
    assert summary.text == "closed “Manual 🚀”" and gone in summary.get_attribute("title")
    page.element_screenshot("history", "history-drawer-closed-dark")
    item.find_element(By.CSS_SELECTOR, '[data-action="reopen"]').click()

    def back():
        s = current(server, ws)
        tab = next((t for t in s.get("tabs", []) if t["id"] == gone), None)
        return tab and tab.get("title") == "Manual 🚀" and tab.get("url") == "https://docs.example/manual?x=1" \
            and s.get("activeTabId") == gone and s
    s = wait_for(back, what="the tab is back, active, with its title and url")
    assert [t["id"] for t in s["tabs"]][:2] == [keep, gone]  # between its old neighbours
    wait_for(lambda: page.bar()["active"] == gone and page.bar()["pending"] == 0, what="page shows it")
    page.wait(lambda d: "Reopened" in d.find_element(By.ID, "history-note").text, "note")
    page.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, f'#closed-list li[data-id="{gone}"]'), "no longer listed")
    # Escape closes the drawer and gives the focus back to its button.
    page.driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    page.wait(lambda d: not d.find_element(By.ID, "history").is_displayed(), "drawer closed")
    assert page.driver.switch_to.active_element.get_attribute("id") == "history-toggle"
    assert page.driver.find_element(By.ID, "history-toggle").get_attribute("aria-expanded") == "false"


def test_refusals_show_the_servers_message_and_older_pages_load(server, browser):
    ws = "refused"
    page = browser("refused", width=560, height=700).open(f"{server.page_url}/w/{ws}?name=carol")
    # 55 ops from the page itself: more than one page of the drawer (50).
    page.js("const id = window.tabsync.add({ title: 'T0' }); for (let i = 1; i < 55; i++) window.tabsync.update(id, { title: 'T' + i });")
    wait_for(lambda: int(current(server, ws)["version"]) == 55 and page.bar()["pending"] == 0, what="55 ops applied")
    open_drawer(page)
    page.wait(lambda d: len(timeline_versions(page)) == 50, "one page")
    older = page.driver.find_element(By.ID, "history-older")
    assert older.is_displayed()
    older.click()
    page.wait(lambda d: timeline_versions(page) == list(range(55, 0, -1)), "all 55, newest first")
    assert not older.is_displayed()
    assert "carol" in page.driver.find_element(By.CSS_SELECTOR, '#timeline li[data-version="1"]').text
    # Each rename names the tab by its title just before it.
    assert page.driver.find_element(By.CSS_SELECTOR, '#timeline li[data-version="10"] .summary').text \
        == 'updated “T8”: title "T9"'

    # Read-only: the server refuses the restore and the drawer says why, in its words.
    # The drawer covers most of a narrow page: close it to reach the checkbox, then open it again.
    page.driver.find_element(By.ID, "history-close").click()
    page.driver.find_element(By.ID, "readonly").click()
    wait_for(lambda: current(server, ws).get("editable", False) is False, what="read-only")
    open_drawer(page)
    page.wait(lambda d: timeline_versions(page)[:1] == [56], "the read-only op listed")
    page.driver.find_element(By.CSS_SELECTOR, '#timeline li[data-version="3"] [data-action="restore"]').click()
    page.driver.find_element(By.CSS_SELECTOR, '[data-action="confirm-restore"]').click()
    note = page.wait(lambda d: d.find_element(By.CSS_SELECTOR, "#history-note.error"), "refusal shown")
    assert "not editable" in note.text, note.text
    assert int(current(server, ws)["version"]) == 56
    page.screenshot("history-drawer-refused-narrow")

"""The scripts' own tests: scripts/test-summary's counting, scripts/lib.py's helpers against a real
tabsync-server, scripts/gen-config-doc's check, and both executables' --version."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
BIN = os.environ.get("TABSYNC_BIN", os.path.join(ROOT, ".build", "debug"))
sys.path.insert(0, SCRIPTS)

import lib  # noqa: E402


def summarize(tmp_path, suites):
    """Runs test-summary over `suites` [(name, xml text or None, exit status)]; (exit, output)."""
    manifest = tmp_path / "suites.tsv"
    lines = []
    for name, xml, status in suites:
        path = tmp_path / f"{name}.xml"
        if xml is not None:
            path.write_text(xml)
        lines.append(f"{name}\t{path}\t{status}\n")
    manifest.write_text("".join(lines))
    result = subprocess.run([sys.executable, os.path.join(SCRIPTS, "test-summary"), str(manifest)],
                            stdout=subprocess.PIPE, text=True)
    return result.returncode, result.stdout


def junit(*cases):
    body = "".join(f'<testcase classname="s" name="{name}">{inner}</testcase>' for name, inner in cases)
    return f'<?xml version="1.0"?><testsuites><testsuite name="s">{body}</testsuite></testsuites>'


def test_the_summary_counts_passed_failed_and_skipped_cases(tmp_path):
    status, out = summarize(tmp_path, [
        ("a", junit(("one", ""), ("two", '<failure message="boom"/>'), ("three", "<skipped/>")), 1),
        ("b", junit(("four", ""), ("five", "<error message='crash'/>")), 1),
    ])
    assert status == 1
    assert out.splitlines()[-1] == "2 passed, 2 failed, 1 skipped"
    assert "[a] s.two: boom" in out


def test_a_runner_without_results_or_tests_or_with_a_silent_failure_counts_as_failed(tmp_path):
    status, out = summarize(tmp_path, [
        ("crashed", None, 134),
        ("empty", junit(), 5),
        ("silent", junit(("one", "")), 2),
    ])
    assert status == 1
    assert out.splitlines()[-1] == "1 passed, 3 failed, 0 skipped"
    assert "pytest collected nothing" in out


def test_the_swift_testing_file_beside_the_xunit_file_is_counted(tmp_path):
    (tmp_path / "swift-swift-testing.xml").write_text(junit(("t1", ""), ("t2", "")))
    status, out = summarize(tmp_path, [("swift", junit(), 0)])
    assert status == 0
    assert out.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"


def test_a_check_writes_one_case_skipped_on_77(tmp_path):
    for code, want in ((0, "1 passed, 0 failed, 0 skipped"), (77, "0 passed, 0 failed, 1 skipped"),
                       (3, "0 passed, 1 failed, 0 skipped")):
        path = tmp_path / f"check{code}.xml"
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "test-summary"), "case", str(path), "check", str(code)],
                       check=True)
        _, out = summarize(tmp_path, [(f"check{code}", path.read_text(), 0 if code == 77 else code)])
        assert out.splitlines()[-1] == want


def test_spread_and_its_format():
    reports = [{"v": 3.0}, None, {"v": 1.0}, {"v": 2.0}, {"x": 1}]
    triple = lib.spread(reports, lambda r: r.get("v"))
    assert triple == (2.0, 1.0, 3.0)
    assert lib.fmt_spread(triple, 1) == "2.0 (1.0–3.0)"
    assert lib.fmt_spread((1500.0, 1000.0, 2000.0), 0, thousands=True) == "1,500 (1,000–2,000)"
    assert lib.fmt_spread(None) == "—"


def test_a_free_port_is_below_the_ephemeral_range_and_bindable():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    port = lib.free_port()
    assert 10000 <= port < low
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def server_binary():
    path = os.path.join(BIN, "tabsync-server")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no {path}: build first")
    return path


def test_a_server_is_started_on_its_listening_line_and_its_metrics_read(tmp_path):
    server = lib.Server(server_binary(), scratch=str(tmp_path))
    try:
        assert server.url == f"ws://127.0.0.1:{server.port}"
        metrics = lib.scrape_metrics(server.port)
        assert metrics.get("tabsync_connections") == 0
    finally:
        assert server.stop() == 0


def test_haproxy_with_the_deploy_config_answers_for_three_servers_and_reports_its_cpu(tmp_path):
    """scripts/compare-nodes' HAProxy: deploy/haproxy.cfg in front of three servers answers through
    to them (a snapshot read of a workspace with no op: 404 from its home node), and its CPU time is
    read from /proc. (Which node a workspace lands on: Tests/TabsyncClusterTests.)"""
    import urllib.error
    import urllib.request
    servers = [lib.Server(server_binary(), scratch=str(tmp_path)) for _ in range(3)]
    proxy = None
    try:
        proxy = lib.HAProxy(servers)
        with pytest.raises(urllib.error.HTTPError) as refusal:
            urllib.request.urlopen(f"http://127.0.0.1:{proxy.port}/v1/workspaces/home-1", timeout=5)
        assert refusal.value.code == 404
        assert proxy.cpu_seconds() >= 0
    finally:
        if proxy:
            proxy.stop()
        for server in servers:
            server.stop()


def test_the_readme_configuration_table_is_current():
    server_binary()
    subprocess.run([sys.executable, os.path.join(SCRIPTS, "gen-config-doc"), "--check", "--bin", BIN], check=True)


@pytest.mark.parametrize("name", ["tabsync", "tabsync-server"])
def test_both_executables_print_the_changelogs_newest_version(name):
    server_binary()
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        newest = re.search(r"^## \[(\d+\.\d+\.\d+)\] - ", f.read(), re.M).group(1)
    out = subprocess.run([os.path.join(BIN, name), "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert out.strip() == newest

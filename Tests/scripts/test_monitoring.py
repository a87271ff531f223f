"""The monitoring files of deploy/ against a real server: Prometheus' own checker and rule tests on
the alert rules, and every metric the rules and the Grafana dashboard name present on a live
tabsync-server's /metrics (a renamed metric would leave an alert that never fires)."""
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
BIN = os.environ.get("TABSYNC_BIN", os.path.join(ROOT, ".build", "debug"))
sys.path.insert(0, SCRIPTS)

import lib  # noqa: E402

RULES = os.path.join(ROOT, "deploy", "prometheus", "tabsync.rules.yml")
RULE_TESTS = os.path.join(ROOT, "deploy", "prometheus", "tabsync.rules.test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "tabsync.json")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def promtool(*args):
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: scripts/test installs Debian's prometheus package"
    return subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=os.path.dirname(RULES))


def exposed_names():
    """The metric names a fresh memory server exposes, from its # TYPE lines."""
    server = lib.Server(os.path.join(BIN, "tabsync-server"))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        server.stop()
    return {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE ")}


def named_in(expr):
    return set(re.findall(r"\btabsync_[a-z_]+", expr))


def base_name(name, types):
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return name


def rule_exprs():
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    return {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    return {f"{p['title']} / {t['refId']}": t["expr"] for p in dashboard["panels"] for t in p["targets"]}


def test_promtool_checks_the_rules_and_their_unit_tests_pass():
    check = promtool("check", "rules", RULES)
    assert check.returncode == 0, check.stdout
    tests = promtool("test", "rules", RULE_TESTS)
    assert tests.returncode == 0, tests.stdout


def test_every_metric_the_rules_and_the_dashboard_name_is_exposed():
    types = exposed_names()
    exprs = {**{f"rule {k}": v for k, v in rule_exprs().items()}, **{f"panel {k}": v for k, v in dashboard_exprs().items()}}
    assert len(exprs) >= 20
    missing = {}
    for where, expr in exprs.items():
        for name in named_in(expr):
            if base_name(name, types) not in types:
                missing.setdefault(name, []).append(where)
    assert not missing, f"named but not on /metrics: {missing}"
    # A histogram is read through its buckets, never by its bare name.
    for where, expr in exprs.items():
        for name in named_in(expr):
            assert types.get(name) != "histogram", f"{where} reads the histogram {name} without _bucket/_sum/_count"


def test_the_dashboard_is_a_grafana_dashboard_over_one_datasource_variable():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    assert dashboard["uid"] == "tabsync" and dashboard["schemaVersion"] >= 36
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["datasource", "instance"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, panel["title"]

"""Backups as an operator takes them (docs/operating.md): `tabsync-server backup` of a SQLite store
while `tabsync bench` writes to it, a backup killed midway, and a PostgreSQL store dumped with
pg_dump, restored into a fresh database and served. Every copy is started as a real server and read
back over HTTP."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
BIN = os.environ.get("TABSYNC_BIN", os.path.join(ROOT, ".build", "debug"))
sys.path.insert(0, SCRIPTS)

import lib  # noqa: E402

SERVER = os.path.join(BIN, "tabsync-server")
TABSYNC = os.path.join(BIN, "tabsync")


def snapshot(port, workspace):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/workspaces/{workspace}", timeout=10) as r:
        return json.loads(r.read())


def versions(port, workspaces):
    """Each workspace's version; 0 for one not made yet (404)."""
    out = {}
    for w in workspaces:
        try:
            out[w] = int(snapshot(port, w).get("version", 0))
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
            out[w] = 0
    return out


def backup(data_dir, to):
    return subprocess.run([SERVER, "backup", "--data-dir", data_dir, "--to", to], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)


def serve_copy(copy, scratch):
    data = os.path.join(scratch, f"restored-{time.time_ns()}")
    os.makedirs(data)
    shutil.copy(copy, os.path.join(data, "tabsync.sqlite3"))
    return lib.Server(SERVER, args=["--data-dir", data], store=None)


def test_a_sqlite_backup_under_load_is_whole_no_older_than_its_start_and_serves(tmp_path):
    server = lib.Server(SERVER, store="sqlite", scratch=str(tmp_path))
    workspaces = [f"bk-{i}" for i in range(10)]
    load = None
    try:
        # Open-loop writes over 10 workspaces for the whole test.
        load = subprocess.Popen([TABSYNC, "bench", "--server", f"127.0.0.1:{server.port}", "--workspaces", "10",
                                 "--workspace-prefix", "bk", "--clients", "5", "--rate", "1000", "--warmup", "1", "--duration", "12",
                                 "--time-limit", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                preexec_fn=lib.raise_nofile)
        deadline = time.time() + 30
        while time.time() < deadline and min(versions(server.port, workspaces).values()) < 20:
            time.sleep(0.2)
        copies = []
        for n in range(3):
            before = versions(server.port, workspaces)
            to = str(tmp_path / f"copy{n}.sqlite3")
            run = backup(server.data, to)
            assert run.returncode == 0, run.stdout
            assert "integrity ok" in run.stdout and "10 workspaces" in run.stdout, run.stdout
            copies.append((to, before))
        after = versions(server.port, workspaces)
        assert load.poll() is None, "the load stopped before the backups were done: they proved nothing"
        for to, before in copies:
            db = sqlite3.connect(f"file:{to}?mode=ro", uri=True)
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            db.close()
            restored = serve_copy(to, str(tmp_path))
            try:
                got = versions(restored.port, workspaces)
            finally:
                restored.stop()
            for w in workspaces:
                assert before[w] <= got[w] <= after[w], f"{w}: copy at v{got[w]}, before the backup v{before[w]}"
        assert any(after[w] > copies[0][1][w] for w in workspaces), "nothing was written during the backups"
    finally:
        if load is not None and load.poll() is None:
            load.kill()
            load.wait()
        server.stop()


def test_a_backup_killed_midway_leaves_the_source_whole_and_no_copy(tmp_path):
    server = lib.Server(SERVER, store="sqlite", scratch=str(tmp_path))
    try:
        # A store of some size, so the copy takes long enough to be killed inside it.
        subprocess.run([TABSYNC, "bench", "--server", f"127.0.0.1:{server.port}", "--workspaces", "40",
                        "--workspace-prefix", "bk", "--clients", "2", "--rate", "2000", "--warmup", "0", "--duration", "4",
                        "--time-limit", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                       preexec_fn=lib.raise_nofile)
        to = str(tmp_path / "killed.sqlite3")
        partial = to + ".partial"
        inside = 0
        for _ in range(20):
            proc = subprocess.Popen([SERVER, "backup", "--data-dir", server.data, "--to", to],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Killed once its copy exists under the temporary name: inside the copy.
            while proc.poll() is None and not os.path.exists(partial):
                time.sleep(0.001)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                if proc.wait() == -signal.SIGKILL:
                    inside += 1
                    assert not os.path.exists(to), "a killed backup left a file under the copy's name"
            if os.path.exists(to):
                os.unlink(to)  # it finished first: try again
            if inside >= 3:
                break
        assert inside >= 1, "no backup was killed inside its copy"
        source = os.path.join(server.data, "tabsync.sqlite3")
        db = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.close()
        # The server goes on, and the next backup is whole (a partial file from a killed one is replaced).
        assert snapshot(server.port, "bk-0")["version"]
        run = backup(server.data, to)
        assert run.returncode == 0, run.stdout
        assert not os.path.exists(to + ".partial")
    finally:
        server.stop()


def test_a_postgresql_store_dumped_and_restored_into_a_fresh_database_serves_the_same_workspaces(tmp_path):
    pg = lib.Postgres()
    try:
        source = pg.fresh_url()
        server = lib.Server(SERVER, args=["--store", source], store=None)
        workspaces = [f"team-{i}" for i in range(5)]
        try:
            for w in workspaces:
                for n in range(4):
                    subprocess.run([TABSYNC, "add", "--title", f"{w} tab {n}", "--url", f"https://example.test/{w}/{n}",
                                    "--server", server.url, "--workspace", w, "--client-id", "seeder"],
                                   check=True, stdout=subprocess.DEVNULL)
            original = {w: snapshot(server.port, w) for w in workspaces}
            dump = str(tmp_path / "tabsync.dump")
            subprocess.run(["pg_dump", "--format=custom", f"--file={dump}", source], check=True)
        finally:
            server.stop()
        restored_url = pg.url.rsplit("/", 1)[0] + "/restored"
        subprocess.run(["psql", "-q", pg.url, "-c", "CREATE DATABASE restored"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["pg_restore", f"--dbname={restored_url}", dump], check=True)
        migrate = subprocess.run([SERVER, "migrate", "--store", restored_url], stdout=subprocess.PIPE, text=True)
        assert migrate.returncode == 0
        restored = lib.Server(SERVER, args=["--store", restored_url], store=None)
        try:
            for w in workspaces:
                assert snapshot(restored.port, w) == original[w]
        finally:
            restored.stop()
    finally:
        pg.destroy()

"""The Python client as a user gets it (issue 42, "packages you can hand to a user"): a wheel built
from clients/python with nothing but what is installed (`pip wheel --no-deps --no-build-isolation
--no-index`), installed offline into a fresh venv in a temporary directory (`--no-index`; its one
dependency, websockets, comes from the system's site-packages), and used from there, with the
repository out of sight, against a real tabsync-server: a session writes an op, the feed and an
HTTP read see it."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import venv

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

from lib import Server  # noqa: E402

BIN = pathlib.Path(os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server")))
OFFLINE = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": "",
           "PIP_ROOT_USER_ACTION": "ignore"}

USE = textwrap.dedent("""
    import asyncio, json, sys
    import tabsync_client
    from tabsync_client import Feed, Http, Session

    async def main(url):
        s = await Session(url, "packed", client_id="wheel").start()
        answer = await s.submit({"add": {"tab": {"id": "w1", "title": "From the wheel"}}})
        await s.close()
        return answer

    url = sys.argv[1]
    answer = asyncio.run(asyncio.wait_for(main(url), 60))
    event = next(iter(Feed(url, "packed", after=0, timeout=30)))
    snapshot = Http(url).snapshot("packed")
    print(json.dumps({"module": tabsync_client.__file__, "version": answer["version"],
                      "feed": [event.kind, event.version, event.data["op"]["add"]["tab"]["id"]],
                      "tabs": [t["id"] for t in snapshot["tabs"]]}))
""")


def test_the_wheel_installs_offline_into_a_clean_venv_and_talks_to_a_real_server(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(dist), str(ROOT / "clients" / "python")],
                   check=True, env=OFFLINE, cwd=tmp_path, capture_output=True, timeout=300)
    wheels = list(dist.glob("tabsync_client-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # pip of the base interpreter installs into the venv (with_pip=False: ensurepip needs no wheel here).
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", str(wheels[0])],
                   check=True, env=OFFLINE, cwd=tmp_path, capture_output=True, timeout=300)
    app = tmp_path / "app"
    app.mkdir()
    (app / "use.py").write_text(USE)
    server = Server(str(BIN), store="memory")
    try:
        run = subprocess.run([str(python), "-I", "use.py", server.url + "/"], cwd=app, env=OFFLINE,
                             capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["module"].startswith(str(env_dir)), f"imported from {got['module']}, not the venv"
    assert got == {**got, "version": "1", "feed": ["op", 1, "w1"], "tabs": ["w1"]}

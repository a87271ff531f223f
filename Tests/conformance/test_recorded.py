"""The transcripts are still what the server says: recorded again from .build/debug/tabsync-server
into a temporary folder, each equals the committed one but for its epochs (random per store),
which both sides name in order of first appearance."""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = os.environ.get("TABSYNC_SERVER_BIN", str(ROOT / ".build" / "debug" / "tabsync-server"))


def epochs_named(transcript):
    text = json.dumps(transcript, sort_keys=True)
    names = {}
    for epoch in re.findall(r'"epoch": "([0-9a-f]+)"', text):
        names.setdefault(epoch, f"E{len(names) + 1}")
    for epoch, name in names.items():
        text = text.replace(f'"{epoch}"', f'"{name}"')
    return json.loads(text)


def test_the_committed_transcripts_are_what_the_server_says_now():
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, str(HERE / "record.py"), "--server", BIN, "--out", out],
                       check=True, stdout=subprocess.DEVNULL, timeout=300)
        fresh = sorted(pathlib.Path(out).glob("*.json"))
        committed = sorted((HERE / "transcripts").glob("*.json"))
        assert [p.name for p in fresh] == [p.name for p in committed]
        for new, old in zip(fresh, committed):
            assert epochs_named(json.loads(new.read_text())) == epochs_named(json.loads(old.read_text())), (
                f"{old.name} differs from what the server says now: run "
                f"`python3 Tests/conformance/record.py --server {BIN}` and read the diff")

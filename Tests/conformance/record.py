#!/usr/bin/env python3
"""Records the conformance transcripts (Tests/conformance/README.md) from a real server.

Each scenario drives a raw `websockets` client (the reference client, written here to the
protocol of proto/README.md, not with any of our client libraries) against a real tabsync-server,
and writes every frame the reference client sent or got as the transcript's steps, with the
actions a client library is asked to take (`do`) and the state it must then show (`state`).

    python3 Tests/conformance/record.py --server .build/debug/tabsync-server [--only NAME]

rewrites Tests/conformance/transcripts/*.json; `git diff` shows what the server now says
differently. The transcripts are replayed by Tests/conformance/playback.py to the Swift, JS and
Python clients.
"""
import argparse
import asyncio
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile

import websockets

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from lib import Server  # noqa: E402

SUBPROTOCOL = "tabsync.v1.json"


def start(binary, data_dir=None, port=0):
    """A real tabsync-server (scripts/lib.py's `Server`): in memory, or on the SQLite store of
    `data_dir`."""
    if data_dir is None:
        return Server(binary, store="memory", port=port)
    return Server(binary, store=None, args=["--data-dir", data_dir], port=port)


def session_url(server, workspace):
    return f"ws://127.0.0.1:{server.port}/v1/workspaces/{workspace}/ws"


class Recorder:
    """Builds one transcript while a scenario runs."""

    def __init__(self, name, about, workspace, client_id):
        self.transcript = {"name": name, "about": about,
                           "client": {"workspace": workspace, "clientId": client_id}, "steps": []}
        self.conn = None
        self.connections = 0

    def step(self, **step):
        self.transcript["steps"].append(step)

    async def connect(self, server, **hello):
        """The client library connects (by itself: its first connection, or a reconnection after
        a cut) and says Hello; the server's Welcome and what follows it are recorded by `take`."""
        self.conn = await websockets.connect(
            session_url(server, self.transcript["client"]["workspace"]), subprotocols=[SUBPROTOCOL])
        self.connections += 1
        self.step(accept=self.connections)
        message = {"hello": {"workspace": self.transcript["client"]["workspace"],
                             "clientId": self.transcript["client"]["clientId"], **hello}}
        self.step(recv=message)
        await self.conn.send(json.dumps(message))

    async def take(self, kind, *, deliver=True):
        """Reads server messages up to and including the next of `kind`, each recorded as `send`
        (`deliver` False: the last is not delivered; the connection is cut instead). `presence`
        is left out: when another session's coming or going reaches this one is timing, and a
        transcript must say the same on every recording."""
        while True:
            message = json.loads(await asyncio.wait_for(self.conn.recv(), 10))
            if "presence" in message:
                continue  # when others' comings and goings reach it is timing, not protocol
            if kind in message and not deliver:
                self.step(cut="before delivering " + kind)
                await self.conn.close()
                return message
            self.step(send=message)
            if kind in message:
                return message

    async def do_submit(self, seq, base_version, op):
        """The library is asked to submit `op`; it must send it with this seq and base version."""
        self.step(do={"submit": op})
        message = {"submit": {"seq": str(seq), "baseVersion": str(base_version), "op": op}}
        self.step(recv=message)
        await self.conn.send(json.dumps(message))

    def client_submits(self, seq, base_version, op):
        """The library is asked to submit `op` and must send it so; the frame is not passed on to
        the server (the next step answers it in the server's place)."""
        self.step(do={"submit": op})
        self.step(recv={"submit": {"seq": str(seq), "baseVersion": str(base_version), "op": op}})

    def refuse_in_place_of_server(self, seq, code, message):
        """A `Rejected` the real server cannot be made to send from here (a store failure), in the
        form of those it sends (proto/README.md, `rejected`)."""
        self.step(send={"rejected": {"seq": str(seq), "code": code, "message": message}},
                  note="written by record.py in the server's place: the server sends it when its store fails")

    async def resend(self, seq, base_version, op):
        """The library sends a pending op again by itself (after a Welcome, or a held op's wait)."""
        message = {"submit": {"seq": str(seq), "baseVersion": str(base_version), "op": op}}
        self.step(recv=message)
        await self.conn.send(json.dumps(message))

    async def opens(self, server):
        """The library's first connection: a Welcome with the empty workspace. Returns it."""
        await self.connect(server)
        welcome = await self.take("welcome")
        self.state(version=0, tabs=[], pending=0)
        return welcome

    async def adds(self, seq, version, tab_id, tabs):
        """The library submits an add of `tab_id` (active when it is the first tab) at `version`
        and sees it applied as the next one, with `tabs` then shown, "a" active."""
        await self.do_submit(seq, version, add(tab_id, activate=not version))
        await self.take("applied")
        self.state(version=version + 1, tabs=tabs, active="a", pending=0)

    async def cut(self, why):
        self.step(cut=why)
        await self.conn.close()

    def state(self, **state):
        """What the library's confirmed state must show now: version, epoch (True: the one of the
        last Welcome), tabs (ids in order), active, pending (ops not yet settled)."""
        self.step(state=state)

    def write(self, directory):
        path = os.path.join(directory, self.transcript["name"] + ".json")
        with open(path, "w") as f:
            json.dump(self.transcript, f, indent=1)
            f.write("\n")
        return path


async def other(server, workspace, client_id, ops):
    """Another session (not recorded) applies `ops` in order."""
    async with websockets.connect(session_url(server, workspace), subprotocols=[SUBPROTOCOL]) as ws:
        await ws.send(json.dumps({"hello": {"workspace": workspace, "clientId": client_id}}))
        welcome = json.loads(await ws.recv())["welcome"]
        version = int(welcome.get("snapshot", {}).get("version", "0"))
        for seq, op in enumerate(ops, 1):
            await ws.send(json.dumps({"submit": {"seq": str(seq), "baseVersion": str(version), "op": op}}))
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if "applied" in message and message["applied"].get("clientId") == client_id:
                    version = int(message["applied"]["version"])
                    break
                if "rejected" in message:
                    raise RuntimeError(f"the other session's op was refused: {message}")


def add(tab_id, activate=False):
    op = {"add": {"tab": {"id": tab_id, "url": f"https://{tab_id}.example/", "title": tab_id.upper()}}}
    if activate:
        op["add"]["activate"] = True
    return op


async def resume_missed_ops(binary, out):
    server = start(binary)
    try:
        r = Recorder("resume-missed-ops",
                     "A client cut after version 1 comes back with lastVersion and epoch; the Welcome "
                     "carries the op it missed (another session's), which it applies.",
                     "conf-resume", "c1")
        welcome = await r.opens(server)
        await r.adds(1, 0, "a", ["a"])
        await r.cut("the connection breaks")
        await other(server, "conf-resume", "c2", [add("b")])
        await r.connect(server, lastVersion="1", epoch=welcome["welcome"]["epoch"])
        await r.take("welcome")
        r.state(version=2, tabs=["a", "b"], active="a", pending=0, epoch=welcome["welcome"]["epoch"])
        return r.write(out)
    finally:
        server.stop()


async def answer_lost_answered_again(binary, out):
    server = start(binary)
    try:
        r = Recorder("answer-lost-answered-again",
                     "The Applied of the client's op is lost with its connection. The next Welcome's "
                     "lastSeq covers the op, which settles nothing: the client sends it again with its "
                     "seq and the server answers it again from its dedup record, applying nothing twice.",
                     "conf-dedup", "c1")
        await r.opens(server)
        await r.do_submit(1, 0, add("a", activate=True))
        await r.take("applied", deliver=False)
        r.state(version=0, tabs=[], pending=1)
        await r.connect(server)
        welcome = await r.take("welcome")
        assert welcome["welcome"].get("lastSeq") == "1", welcome
        await r.resend(1, 0, add("a", activate=True))
        await r.take("applied")
        r.state(version=1, tabs=["a"], active="a", pending=0)
        return r.write(out)
    finally:
        server.stop()


async def history_replaced(binary, out):
    """The server comes back from a backup copy: a new epoch, a version below the one seen."""
    root = tempfile.mkdtemp(prefix="tabsync-conformance-")
    data = os.path.join(root, "live")
    try:
        server = start(binary, data)
        r = Recorder("history-replaced",
                     "The server is brought back from a backup taken at version 1 (a marked copy: a "
                     "new epoch). The client, at version 2 under the old epoch, takes the snapshot "
                     "whole: no splice, nothing of the old history kept, its next seq after lastSeq.",
                     "conf-epoch", "c1")
        first = await r.opens(server)
        await r.adds(1, 0, "a", ["a"])
        backup = os.path.join(root, "backup.sqlite3")
        subprocess.run([binary, "backup", "--data-dir", data, "--to", backup], check=True,
                       stdout=subprocess.DEVNULL)
        await r.do_submit(2, 1, add("b"))
        await r.take("applied")
        old_epoch = first["welcome"]["epoch"]
        r.state(version=2, tabs=["a", "b"], active="a", pending=0, epoch=old_epoch)
        await r.cut("the server stops")
        server.stop()
        shutil.rmtree(data)
        os.makedirs(data)
        shutil.copy(backup, os.path.join(data, "tabsync.sqlite3"))
        server = start(binary, data, port=server.port)
        await r.connect(server, lastVersion="2", epoch=old_epoch)
        welcome = await r.take("welcome")
        assert welcome["welcome"]["epoch"] != old_epoch, welcome
        r.state(version=1, tabs=["a"], active="a", pending=0, epoch=welcome["welcome"]["epoch"])
        await r.do_submit(3, 1, add("c"))
        await r.take("applied")
        r.state(version=2, tabs=["a", "c"], active="a", pending=0)
        server.stop()
        return r.write(out)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def remove_reopen_restore(binary, out):
    server = start(binary)
    try:
        r = Recorder("remove-reopen-restore",
                     "Another session removes a tab, reopens it, then restores the workspace to "
                     "version 2: the client applies each Applied's canonical result (the reopened tab "
                     "at its recorded place, the restored state whole) without the rules.",
                     "conf-restore", "c1")
        await r.opens(server)
        await r.adds(1, 0, "a", ["a"])
        await r.adds(2, 1, "b", ["a", "b"])
        await r.adds(3, 2, "c", ["a", "b", "c"])
        await other(server, "conf-restore", "c2", [
            {"remove": {"tabId": "a"}},
            {"reopen": {"tabId": "a"}},
            {"restore": {"version": "2"}},
        ])
        for _ in range(3):
            await r.take("applied")
        r.state(version=6, tabs=["a", "b"], active="a", pending=0)
        return r.write(out)
    finally:
        server.stop()


async def held_op_retried_after_unavailable(binary, out):
    server = start(binary)
    try:
        r = Recorder("held-op-retried-after-unavailable",
                     "The server refuses an op UNAVAILABLE (its store failed; nothing consumed). The "
                     "client holds it, still shown, and after its back-off sends it again as a new op "
                     "with a new seq; it lands. (The refusal is written in the server's place.)",
                     "conf-held", "c1")
        await r.opens(server)
        await r.adds(1, 0, "a", ["a"])
        r.client_submits(2, 1, add("b"))
        r.refuse_in_place_of_server(2, "UNAVAILABLE", "the store failed; the workspace is reloading")
        await r.resend(3, 1, add("b"))
        await r.take("applied")
        r.state(version=2, tabs=["a", "b"], active="a", pending=0)
        return r.write(out)
    finally:
        server.stop()


def http_exchange(server, path, key, ops):
    """One write as a raw `http.client` request: (the request as a `request` step names it, the
    answer as a `respond` step gives it: status, Retry-After when sent, JSON body)."""
    body = json.dumps({"ops": ops})
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", "Idempotency-Key": key})
        answer = conn.getresponse()
        respond = {"status": answer.status, "body": json.loads(answer.read())}
        if answer.getheader("Retry-After"):
            respond["headers"] = {"Retry-After": answer.getheader("Retry-After")}
    finally:
        conn.close()
    return {"method": "POST", "path": path, "headers": {"idempotency-key": key}, "body": {"ops": ops}}, respond


async def http_write_repeated(binary, out):
    server = start(binary)
    try:
        workspace = "conf-http"
        r = Recorder("http-write-repeated",
                     "An HTTP write (POST /v1/workspaces/{id}/ops with an Idempotency-Key) whose answer "
                     "is lost: the library sends it again with the same key and body, and the server "
                     "answers it the same from its dedup record, applying nothing twice. Another body "
                     "under the used key is refused 422; the library reports it and does not retry.",
                     workspace, "")
        path = f"/v1/workspaces/{workspace}/ops"
        ops = [add("a", activate=True), add("b")]
        r.step(do={"write": {"key": "open-ab", "ops": ops}})
        request, lost = http_exchange(server, path, "open-ab", ops)
        assert lost["status"] == 200, lost
        r.step(request=request)
        r.step(drop="the answer is lost: the connection closes before a byte of it", lost=lost)
        request, again = http_exchange(server, path, "open-ab", ops)
        assert again == lost, (lost, again)
        r.step(request=request)
        r.step(respond=again)
        r.step(result={"results": again["body"]["results"]})
        other_ops = [add("c")]
        r.step(do={"write": {"key": "open-ab", "ops": other_ops}})
        request, refused = http_exchange(server, path, "open-ab", other_ops)
        assert refused["status"] == 422, refused
        r.step(request=request)
        r.step(respond=refused)
        r.step(result={"status": 422})
        return r.write(out)
    finally:
        server.stop()


SCENARIOS = {
    "held-op-retried-after-unavailable": held_op_retried_after_unavailable,
    "resume-missed-ops": resume_missed_ops,
    "answer-lost-answered-again": answer_lost_answered_again,
    "history-replaced": history_replaced,
    "remove-reopen-restore": remove_reopen_restore,
    "http-write-repeated": http_write_repeated,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="the tabsync-server binary")
    parser.add_argument("--only", help="one scenario")
    parser.add_argument("--out", default=os.path.join(HERE, "transcripts"))
    args = parser.parse_args()
    for name, scenario in SCENARIOS.items():
        if args.only and name != args.only:
            continue
        print(asyncio.run(scenario(os.path.abspath(args.server), args.out)))


if __name__ == "__main__":
    sys.exit(main())

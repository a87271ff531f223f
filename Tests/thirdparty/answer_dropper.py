"""A proxy that loses answers, and issue 42's Done-when driven through it (docs/design.md, "HTTP
writes").

`AnswerDropper` stands before a server (or HAProxy) on 127.0.0.1: it passes each request on whole,
reads the server's whole answer, keeps it, and closes the client's connection without sending a
byte of it, as a proxy or network failing after the server answered does. So the write is known to
have reached the server and been answered, and the client never learns how.

`thousand_writes` sends 1,000 writes, each three times under one `Idempotency-Key`: through the
dropper (the answer lost), then twice straight to the server. It asserts the three answers are the
same (the dropped one as the dropper kept it) and returns each workspace's version as the writes
left it, for the caller to check against the store.
"""
import http.client
import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor


def read_message(sock):
    """One HTTP/1.1 message (head and a Content-Length body) from `sock`: (head, body) as bytes."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"the peer closed before a whole head: {data[:200]!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the peer closed before a whole body")
        body += chunk
    return head, body


class AnswerDropper:
    """Listens on 127.0.0.1 (a free port) and forwards to `upstream` ("host:port"), one request per
    connection; `dropped[key]` is the JSON body of the answer it kept back for that key."""

    def __init__(self, upstream):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.dropped = {}
        self.errors = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._drop, args=(client,), daemon=True).start()

    def _drop(self, client):
        try:
            with client, socket.create_connection(self.upstream, timeout=120) as server:
                client.settimeout(120)
                head, body = read_message(client)
                key = next(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                           if line.lower().startswith(b"idempotency-key:"))
                server.sendall(head + b"\r\n\r\n" + body)
                answer_head, answer = read_message(server)
                status = int(answer_head.split(b" ", 2)[1])
                with self.lock:
                    self.dropped[key] = (status, json.loads(answer))
                # The client's connection is closed with nothing of the answer sent.
        except Exception as e:  # noqa: BLE001 (kept for the test to report)
            with self.lock:
                self.errors.append(repr(e))

    def close(self):
        self.listener.close()


def post(base, path, body, key, token):
    """(status, decoded JSON) of one write sent straight to `base` (http://host:port)."""
    host, port = base.split("://", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("POST", path, body=body, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {token}", "Idempotency-Key": key})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def thousand_writes(base, token, workspaces, total=1000, workers=4):
    """Issue 42's Done-when against `base`: `total` one-op writes spread over `workspaces` (an add,
    then its remove, so no workspace reaches its tab limit), each sent through the dropper and then
    twice straight. Each workspace's writes go in order on one worker; `workers` at once. Returns
    {workspace: number of writes made to it}."""
    dropper = AnswerDropper(base.split("://", 1)[1])
    per = {w: [i for i in range(total) if i % len(workspaces) == n] for n, w in enumerate(workspaces)}

    def run(workspace):
        path = f"/v1/workspaces/{workspace}/ops"
        for j, i in enumerate(per[workspace]):
            op = {"add": {"tab": {"id": f"t{j}", "title": f"T{i}"}}} if j % 2 == 0 else {"remove": {"tabId": f"t{j - 1}"}}
            body = json.dumps({"ops": [op]})
            key = f"w-{workspace}-{i}"
            lost = http.client.HTTPConnection("127.0.0.1", dropper.port, timeout=120)
            try:
                lost.request("POST", path, body=body, headers={
                    "Content-Type": "application/json", "Authorization": f"Bearer {token}", "Idempotency-Key": key})
                try:
                    answer = lost.getresponse()
                    raise AssertionError(f"the dropper let an answer through: {answer.status}")
                except (http.client.RemoteDisconnected, ConnectionResetError):
                    pass  # the answer was lost
            finally:
                lost.close()
            with dropper.lock:
                assert not dropper.errors, dropper.errors
                first = dropper.dropped.pop(key)
            again = [post(base, path, body, key, token) for _ in range(2)]
            assert first[0] == 200 and "version" in first[1]["results"][0], (key, first)
            assert again == [first, first], (key, first, again)
        return workspace, len(per[workspace])

    try:
        with ThreadPoolExecutor(workers) as pool:
            return dict(pool.map(run, workspaces))
    finally:
        dropper.close()

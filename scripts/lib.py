"""Shared helpers of tabsync's Python scripts (loadtest, compare-*, soak, profile-fanout, test-summary).
Import it; do not run it. The bash scripts' counterpart is scripts/lib.sh.

What is here, once each: messages (`log`, `fatal`), the open-file limit (`raise_nofile`), free ports
(`free_port`, `ephemeral_ports_free`), the machine's load and memory, a tabsync-server process and its "listening on" line
(`Server`), libwebsockets' own test server (`MirrorServer`), a throwaway PostgreSQL cluster
(`Postgres`, over scripts/postgres), one `tabsync bench` run (`bench`), a `/metrics` scrape
(`scrape_metrics`), medians with their range (`spread`, `fmt_spread`), and JUnit XML for runners
that write none of their own (`write_junit`).
"""
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from xml.sax.saxutils import quoteattr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# ------------------------------------------------------------------ messages

def log(message):
    print(f"==> {message}", file=sys.stderr, flush=True)


def fatal(message):
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


# ------------------------------------------------------------------ the machine

def raise_nofile():
    """Raises this process' open-file soft limit to the hard limit (a server or bench holds one fd per
    connection); returns the hard limit. Also usable as a `preexec_fn`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def free_port():
    """A TCP port of 127.0.0.1 nothing is bound to, below the kernel's ephemeral range (as lib.sh's
    free_port): a port for a server to bind later, which the thousands of outgoing connections of a
    load test beside it cannot take meanwhile."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    if low <= 11000:
        fatal(f"the ephemeral port range starts at {low}: no room below it for a fixed port")
    for _ in range(100):
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    fatal(f"no free port found below {low}")


def loadavg():
    """The 1-minute load average, as the text /proc/loadavg gives."""
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def ephemeral_ports_free():
    """Ports of the kernel's ephemeral range no TCP socket of 127.0.0.1 holds (TIME_WAIT included):
    a load test's clients each need one, and a run right after another's thousands of closes finds many
    still held (TIME_WAIT lasts 60 s)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(v) for v in f.read().split())
    held = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    port = int(line.split()[1].rsplit(":", 1)[1], 16)
                    if low <= port <= high:
                        held.add(port)
        except OSError:
            pass
    return high - low + 1 - len(held)


def available_memory_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def release_binaries(build=True):
    """{name: path} of the release `tabsync` and `tabsync-server`, built first unless build=False."""
    if build:
        log("building release binaries")
        for product in ("tabsync-server", "tabsync"):
            subprocess.run(["swift", "build", "-c", "release", "--product", product], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
    bindir = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True,
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    return {name: os.path.join(bindir, name) for name in ("tabsync", "tabsync-server")}


# ------------------------------------------------------------------ servers

def stop_process(proc, sig=signal.SIGTERM, timeout=10):
    """Sends `sig` and waits up to `timeout` s, then SIGKILL; returns the exit status (None if it
    had to be killed)."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


class Server:
    """A tabsync-server on 127.0.0.1 (port 0 unless given), started and waited for: its stdout's
    `listening on ws://HOST:PORT` line gives `url` and `port`.

    store: "memory" (`--memory`), "sqlite" (a fresh data dir under `scratch`, removed by `stop`), or
    None (the caller's `args` say). `args` go after the common flags; `wrapper` runs the server under
    another program (valgrind). stdout goes to `stdout_path` (a temp file when None), stderr to
    `stderr_path` (nowhere when None); both are appended to."""

    COMMON = ["--log-level", "error", "--max-connections", "20000", "--max-ops-per-second", "1000"]

    def __init__(self, binary, args=(), store="memory", port=0, common=True, wrapper=(), stdout_path=None,
                 stderr_path=None, scratch="/tmp", start_timeout=30):
        self.binary = binary
        self.data = None
        command = list(wrapper) + [binary, "--host", "127.0.0.1", "--port", str(port)]
        if common:
            command += self.COMMON
        if store == "memory":
            command.append("--memory")
        elif store == "sqlite":
            self.data = os.path.join(scratch, f"tabsync-data-{os.getpid()}-{time.time_ns()}")
            command += ["--data-dir", self.data]
        command += list(args)
        self.command = command
        self._own_stdout = stdout_path is None
        self.stdout_path = stdout_path or os.path.join(scratch, f"tabsync-server-{os.getpid()}-{time.time_ns()}.out")
        with open(self.stdout_path, "a") as out, \
                (open(stderr_path, "a") if stderr_path else open(os.devnull, "w")) as err:
            self._offset = out.tell()
            self.proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         preexec_fn=raise_nofile)
        self.pid = self.proc.pid
        self.url = self._wait_listening(start_timeout)
        if not self.url:
            self.stop(signal.SIGKILL)
            raise RuntimeError(f"tabsync-server did not start: {' '.join(command)}")
        self.port = int(self.url.rsplit(":", 1)[1])

    def _wait_listening(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(self.stdout_path) as f:
                f.seek(self._offset)
                for line in f:
                    if line.startswith("listening on "):
                        return line.split("listening on ", 1)[1].strip()
            if self.proc.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10, keep_data=False):
        """Stops it (SIGKILL after `timeout` s); returns the exit status (None when killed)."""
        status = stop_process(self.proc, sig, timeout)
        if self._own_stdout and os.path.exists(self.stdout_path):
            os.unlink(self.stdout_path)
        if self.data and not keep_data:
            shutil.rmtree(self.data, ignore_errors=True)
        return status


class MirrorServer:
    """libwebsockets' own test server (Debian's libwebsockets-test-server, its lws-mirror-protocol) on
    a free loopback port: the raw-libwebsockets baseline. `-i lo` binds the loopback interface only
    (an address given to -i binds every interface in 4.1.6)."""

    def __init__(self, wrapper=(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_timeout=5):
        self.port = free_port()
        self.proc = subprocess.Popen(list(wrapper) + ["libwebsockets-test-server", "-p", str(self.port), "-i", "lo",
                                                      "-d", "1"],
                                     stdout=stdout, stderr=stderr, preexec_fn=raise_nofile)
        self.pid = self.proc.pid
        deadline = time.time() + start_timeout
        while time.time() < deadline and self.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=6):
        return stop_process(self.proc, sig, timeout)


class HAProxy:
    """HAProxy with deploy/haproxy.cfg (the file the cluster tests and docker-compose use) on a free
    loopback port in front of exactly three `servers` (its TABSYNC_NODE1..3), waited for until a
    GET /healthz through it succeeds. `cpu_seconds()` reads its CPU time (user + system) from
    /proc/PID/stat. With `stats=True` it opens its runtime API on a Unix socket
    (TABSYNC_HAPROXY_STATS), and `node_stats()` reads how it sees each node."""

    def __init__(self, servers, start_timeout=15, stats=False):
        if len(servers) != 3:
            raise ValueError("deploy/haproxy.cfg names three nodes")
        self.port = free_port()
        env = dict(os.environ, TABSYNC_HAPROXY_BIND=f"127.0.0.1:{self.port}")
        self.stats_path = f"/tmp/tabsync-haproxy-{os.getpid()}-{time.time_ns()}.sock" if stats else None
        if self.stats_path:
            env["TABSYNC_HAPROXY_STATS"] = self.stats_path
        for n, server in enumerate(servers, 1):
            env[f"TABSYNC_NODE{n}"] = f"127.0.0.1:{server.port}"
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", os.path.join(ROOT, "deploy", "haproxy.cfg")], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, preexec_fn=raise_nofile)
        self.pid = self.proc.pid
        deadline = time.time() + start_timeout
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1).read()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError("HAProxy did not start with deploy/haproxy.cfg")
                time.sleep(0.05)

    def cpu_seconds(self):
        with open(f"/proc/{self.pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def node_stats(self, timeout=2):
        """{"node1": {"status": "UP"/"DOWN"/"UP 1/2"..., "sessions": current sessions}, ...} of the
        backend's servers from the runtime API's `show stat` (needs stats=True); {} when it does not
        answer."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(timeout)
                s.connect(self.stats_path)
                s.sendall(b"show stat\n")
                chunks = []
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
        except OSError:
            return {}
        lines = b"".join(chunks).decode().splitlines()
        if not lines:
            return {}
        header = lines[0].lstrip("# ").split(",")
        nodes = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == "nodes" and row.get("svname") not in (None, "BACKEND"):
                nodes[row["svname"]] = {"status": row.get("status", ""), "sessions": int(row.get("scur") or 0)}
        return nodes

    def stop(self, sig=signal.SIGTERM, timeout=6):
        status = stop_process(self.proc, sig, timeout)
        if self.stats_path and os.path.exists(self.stats_path):
            os.unlink(self.stats_path)
        return status


class Postgres:
    """A throwaway PostgreSQL cluster of scripts/postgres (fsync on, loopback, a free port), removed by
    `destroy`; `fresh_url()` makes a new database in it for each run."""

    def __init__(self, directory=None):
        self.dir = directory or f"/tmp/tabsync-pg-{os.getpid()}-{time.time_ns()}"
        out = subprocess.run([os.path.join(HERE, "postgres"), "start", self.dir], check=True, stdout=subprocess.PIPE,
                             text=True).stdout
        self.url = next(l.split("=", 1)[1] for l in out.splitlines() if "TABSYNC_TEST_POSTGRES_URL=" in l)
        self.databases = 0

    def fresh_url(self):
        """A new empty database. The previous run's is dropped first, and the dirty pages it left
        are flushed (CHECKPOINT): otherwise autovacuum and the checkpointer work on it during the
        next runs, and their CPU counts as this run's (PostgreSQL's CPU per op at a fixed 1,000 ops/s
        rose from 530 to about 1,450 µs from the second round on)."""
        if self.databases:
            subprocess.run(["psql", "-q", self.url, "-c", f"DROP DATABASE IF EXISTS bench{self.databases} WITH (FORCE)"],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["psql", "-q", self.url, "-c", "CHECKPOINT"], check=True, stdout=subprocess.DEVNULL)
        self.databases += 1
        name = f"bench{self.databases}"
        subprocess.run(["psql", "-q", self.url, "-c", f"CREATE DATABASE {name}"], check=True,
                       stdout=subprocess.DEVNULL)
        return self.url.rsplit("/", 1)[0] + "/" + name

    def pids(self):
        """The postmaster and its children now (its backends, WAL writer, checkpointer...)."""
        with open(f"{self.dir}/data/postmaster.pid") as f:
            master = int(f.readline())
        pids = [master]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == master:
                pids.append(int(entry))
        return pids

    def destroy(self):
        subprocess.run([os.path.join(HERE, "postgres"), "destroy", self.dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


# ------------------------------------------------------------------ measuring

def bench(tabsync, servers, args, time_limit=120, timeout=None, json_path=None, store_pids=(), keep_json=True,
          front=None):
    """One `tabsync bench` run against `servers` (objects with `port` and `pid`): returns its JSON
    report with `_load` (the load average at its start and end, "a-b") and `_stderr`, or None when it
    failed (the reason is logged). The report file is `json_path` (a temp file, removed, when None).
    With `front` (a port: HAProxy's), every client connects there and `servers` only give the pids
    whose CPU is measured."""
    path = json_path or f"/tmp/tabsync-bench-{os.getpid()}-{time.time_ns()}.json"
    command = [tabsync, "bench", "--time-limit", str(time_limit), "--json", path]
    if front is not None:
        command += ["--server", f"127.0.0.1:{front}"]
    for server in servers:
        if front is None:
            command += ["--server", f"127.0.0.1:{server.port}"]
        command += ["--server-pid", str(server.pid)]
    for pid in store_pids:
        command += ["--store-pid", str(pid)]
    command += list(args)
    load = loadavg()
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                timeout=timeout or time_limit + 30, preexec_fn=raise_nofile)
    except subprocess.TimeoutExpired:
        log(f"bench killed after {timeout or time_limit + 30} s")
        return None
    load_after = loadavg()
    if result.returncode != 0 or not os.path.exists(path):
        log(f"bench exited {result.returncode}: {result.stderr.strip()[-300:]}")
        return None
    with open(path) as f:
        report = json.load(f)
    if not json_path or not keep_json:
        os.unlink(path)
    report["_loadavg"] = float(load)
    report["_load"] = f"{load}-{load_after}"
    report["_stderr"] = result.stderr
    return report


def scrape_metrics(port, timeout=10):
    """{name: value} of a server's unlabelled /metrics samples; {} when it does not answer."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout).read().decode()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#") and "{" not in parts[0]:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return values


def field(report, *path):
    """report[path[0]][path[1]]..., None where any step is missing."""
    value = report
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def spread(reports, getter):
    """(median, min, max) of `getter` over the reports that exist and have a value; None if none."""
    values = [v for v in (getter(r) for r in reports if r) if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def median(reports, getter):
    """The median of `getter` over the reports that exist and have a value; NaN if none."""
    triple = spread(reports, getter)
    return triple[0] if triple else float("nan")


def fmt_spread(triple, digits=1, scale=1.0, thousands=False, missing="—"):
    """`median (min–max)`, each scaled and with `digits` decimals."""
    if triple is None:
        return missing
    pattern = f"{{:{',' if thousands else ''}.{digits}f}}"
    low_high = [pattern.format(v * scale) for v in triple]
    return f"{low_high[0]} ({low_high[1]}–{low_high[2]})"


# ------------------------------------------------------------------ test results

def write_junit(path, suite, cases):
    """Writes JUnit XML for a runner that writes none: `cases` are (name, outcome, message, seconds)
    with outcome "passed", "failed" or "skipped"."""
    lines = []
    counts = {"failed": 0, "skipped": 0}
    for name, outcome, message, seconds in cases:
        if outcome in counts:
            counts[outcome] += 1
        body = ""
        if outcome == "failed":
            body = f"<failure message={quoteattr(message or 'failed')}/>"
        elif outcome == "skipped":
            body = f"<skipped message={quoteattr(message or 'skipped')}/>"
        lines.append(f'    <testcase classname={quoteattr(suite)} name={quoteattr(name)} time="{seconds or 0:.3f}">'
                     f"{body}</testcase>")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
                f'  <testsuite name={quoteattr(suite)} tests="{len(cases)}" failures="{counts["failed"]}" '
                f'skipped="{counts["skipped"]}" errors="0">\n' + "\n".join(lines) + "\n  </testsuite>\n</testsuites>\n")

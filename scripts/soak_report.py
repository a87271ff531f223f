#!/usr/bin/env python3
"""Figures, pass/fail and an SVG plot of a soak run's server samples (scripts/soak writes the CSVs).

  soak_report.py SOAK.csv EVENTS.csv OUT.svg --connections N --bench-start S --duration S --idle-fds N

The measured window is the last server life (after the last restart) minus its first third
(warm-up: reconnects, workspaces loading, the op log filling to --log-retention), up to the end of
the churn. Pass when, over that window:
  - RSS is flat: its least-squares slope is at most 512 KiB/min, or its growth over the window
    (slope x window length) at most 8 MiB (short runs, where a slope is mostly noise);
  - fds beyond the sockets the server counts open (its `tabsync_sockets_open`, sampled beside
    each fd count) are flat: the median of the window's last fifth within 16 of its first fifth's,
    and of the first life's steady part (before the first restart, after its own first third).
    Open fds themselves follow the churn's sockets (more while the server falls behind and
    handshakes or closes wait), bounded by --max-connections: reported, not bounded here;
  - threads are flat: max - min over the window at most 2;
  - with no client left (the "idle" event onwards), fds are back to at most the fresh server's + 8.
Writes OUT.svg (RSS, fds and threads against minutes; restarts and the window marked) and prints
the figures; exits 1 with one "FAILED: ..." line per check that failed.
"""
import argparse
import csv
import statistics
import sys

RSS_SLOPE_MAX_KIB_PER_MIN = 512
RSS_GROWTH_MAX_KIB = 8192
OTHER_FDS_BOUND = 16


def slope(points):
    """Least-squares slope of (x, y) points, per unit of x."""
    if len(points) < 3:
        return 0.0
    mx = sum(p[0] for p in points) / len(points)
    my = sum(p[1] for p in points) / len(points)
    den = sum((p[0] - mx) ** 2 for p in points)
    return 0.0 if den == 0 else sum((p[0] - mx) * (p[1] - my) for p in points) / den


def fifth_medians(values):
    n = max(1, len(values) // 5)
    return statistics.median(values[:n]), statistics.median(values[-n:])


def nice_ticks(lo, hi, count=5):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 1
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    start = int(lo / step) * step
    ticks = []
    t = start
    while t <= hi + 1e-9:
        if t >= lo - 1e-9:
            ticks.append(t)
        t += step
    return ticks


def svg_plot(path, rows, events, window, fit, title):
    width, left, right, panel_h, gap, top = 960, 80, 30, 190, 50, 50
    panels = [("RSS (MiB)", [r["rss"] / 1024 for r in rows]), ("open fds", [r["fds"] for r in rows]),
              ("fds beyond sockets", [r["other"] for r in rows]), ("threads", [r["threads"] for r in rows])]
    height = top + len(panels) * (panel_h + gap) + 30
    xs = [r["t"] / 60 for r in rows]
    x_max = max(xs + [e[0] / 60 for e in events] + [1e-3])
    plot_w = width - left - right
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>']

    def px(x):
        return left + x / x_max * plot_w

    for i, (label, ys) in enumerate(panels):
        y0 = top + i * (panel_h + gap)
        known = [y for y in ys if y is not None]
        lo, hi = (min(known), max(known)) if known else (0, 1)
        # fds beyond sockets may dip below 0 (sockets counted just after the fds, while ramping up)
        lo = 0 if label not in ("threads", "fds beyond sockets") else (lo - 2 if label != "threads" else max(0, lo - 2))
        hi = hi * 1.1 + (1 if label in ("threads", "fds beyond sockets") else 0)

        def py(y, lo=lo, hi=hi, y0=y0):
            return y0 + panel_h - (y - lo) / (hi - lo or 1) * panel_h

        out.append(f'<rect x="{px(window[0] / 60):.1f}" y="{y0}" width="{px(window[1] / 60) - px(window[0] / 60):.1f}" '
                   f'height="{panel_h}" fill="#e8f4e8"/>')
        out.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel_h}" fill="none" stroke="#444"/>')
        for t in nice_ticks(lo, hi):
            y = py(t)
            out.append(f'<line x1="{left - 4}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
        for t in nice_ticks(0, x_max, 10):
            x = px(t)
            out.append(f'<line x1="{x:.1f}" y1="{y0 + panel_h}" x2="{x:.1f}" y2="{y0 + panel_h + 4}" stroke="#444"/>')
            out.append(f'<text x="{x:.1f}" y="{y0 + panel_h + 17}" text-anchor="middle">{t:g}</text>')
        out.append(f'<text x="18" y="{y0 + panel_h / 2}" transform="rotate(-90 18 {y0 + panel_h / 2})" '
                   f'text-anchor="middle">{label}</text>')
        for t, name in events:
            if "restart" in name or name in ("bench done", "idle"):
                x = px(t / 60)
                color = "#c00" if "restart" in name else "#888"
                out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + panel_h}" stroke="{color}" '
                           f'stroke-dasharray="5,4"/>')
                if i == 0 and "restart" in name:
                    out.append(f'<text x="{x + 4:.1f}" y="{y0 + 14}" fill="{color}">{name}</text>')
        # One polyline per server process, so a restart is not drawn as a line through zero.
        segments, current, last_pid = [], [], None
        for x, y, r in zip(xs, ys, rows):
            if (r["pid"] != last_pid or y is None) and current:
                segments.append(current)
                current = []
            last_pid = r["pid"]
            if y is not None:
                current.append(f"{px(x):.1f},{py(y):.1f}")
        if current:
            segments.append(current)
        for seg in segments:
            out.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="#1f5fbf" stroke-width="1.5"/>')
        if i == 0 and fit:
            (a, b) = fit
            x1, x2 = window[0] / 60, window[1] / 60
            out.append(f'<line x1="{px(x1):.1f}" y1="{py((a + b * x1) / 1024):.1f}" x2="{px(x2):.1f}" '
                       f'y2="{py((a + b * x2) / 1024):.1f}" stroke="#e08000" stroke-width="2"/>')
            out.append(f'<text x="{px(x1) + 4:.1f}" y="{y0 + panel_h - 8}" fill="#a05000">measured window: '
                       f'slope {b:+.0f} KiB/min</text>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">minutes since the soak started</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv=None):
    """Returns 0 when every check passed, 1 otherwise (printing a FAILED line for each)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("events")
    ap.add_argument("svg")
    ap.add_argument("--connections", type=int, required=True)
    ap.add_argument("--bench-start", type=float, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--idle-fds", type=int, required=True)
    ap.add_argument("--title", default="tabsync soak: server resources")
    a = ap.parse_args(argv)

    with open(a.csv) as f:
        rows = [{"t": float(r["seconds"]), "pid": r["pid"], "rss": int(r["rss_kib"]), "fds": int(r["fds"]),
                 "threads": int(r["threads"]),
                 "other": int(r["fds"]) - int(r["sockets"]) if r.get("sockets") else None}
                for r in csv.DictReader(f)]
    with open(a.events) as f:
        events = [(float(r["seconds"]), r["event"]) for r in csv.DictReader(f)]
    failures = []
    if not rows:
        print("FAILED: no samples")
        return 1
    restarts = [t for t, e in events if "restart" in e]
    churn_end = a.bench_start + a.duration
    life_start = restarts[-1] if restarts else a.bench_start
    window = (life_start + (churn_end - life_start) / 3, churn_end)
    in_window = [r for r in rows if window[0] <= r["t"] <= window[1]]
    fit = None
    if len(in_window) < 5:
        failures.append(f"only {len(in_window)} samples in the measured window")
    else:
        minutes = (window[1] - window[0]) / 60
        pts = [(r["t"] / 60, r["rss"]) for r in in_window]
        b = slope(pts)
        a0 = sum(p[1] for p in pts) / len(pts) - b * sum(p[0] for p in pts) / len(pts)
        fit = (a0, b)
        growth = b * minutes
        rss = [r["rss"] for r in in_window]
        print(f"RSS: {rss[0] / 1024:.1f} MiB at the window's start, {rss[-1] / 1024:.1f} MiB at its end, "
              f"max {max(r['rss'] for r in rows) / 1024:.1f} MiB over the run; slope {b:+.1f} KiB/min over "
              f"{minutes:.1f} min ({growth / 1024:+.2f} MiB); bound {RSS_SLOPE_MAX_KIB_PER_MIN} KiB/min "
              f"or {RSS_GROWTH_MAX_KIB // 1024} MiB in all")
        if b > RSS_SLOPE_MAX_KIB_PER_MIN and growth > RSS_GROWTH_MAX_KIB:
            failures.append(f"RSS grows {b:.0f} KiB/min ({growth / 1024:.1f} MiB over the window)")
        # Open fds follow the sockets the churn leaves open (connections, handshakes and closes in
        # progress: more when the server falls behind), so they are reported, and the bound is on
        # the fds beyond the sockets the server counts (files, pipes, the listener, lost sockets).
        fds = [r["fds"] for r in in_window]
        first, last = fifth_medians(fds)
        fd_slope = slope([(r["t"] / 60, r["fds"]) for r in in_window])
        print(f"fds: median {first:.0f} in the window's first fifth, {last:.0f} in its last, "
              f"{min(fds)}-{max(fds)} (slope {fd_slope:+.1f}/min; the sockets of {a.connections} churning connections)")
        others = [r["other"] for r in in_window if r["other"] is not None]
        if len(others) < 5:
            failures.append(f"only {len(others)} samples of the server's open sockets in the window (/metrics)")
        else:
            o_first, o_last = fifth_medians(others)
            print(f"fds beyond sockets: median {o_first:.0f} in the window's first fifth, {o_last:.0f} in its last "
                  f"(range {min(others)}-{max(others)}); bound ±{OTHER_FDS_BOUND}")
            if abs(o_last - o_first) > OTHER_FDS_BOUND:
                failures.append(f"fds beyond sockets went from {o_first:.0f} to {o_last:.0f} over the window")
            if restarts:
                before = [r["other"] for r in rows if r["other"] is not None
                          and a.bench_start + (restarts[0] - a.bench_start) / 3 <= r["t"] < restarts[0]]
                if before:
                    steady = statistics.median(before)
                    after = statistics.median(others)
                    print(f"fds beyond sockets before the first restart: median {steady:.0f}; after the last: {after:.0f}")
                    if abs(after - steady) > OTHER_FDS_BOUND:
                        failures.append(f"fds beyond sockets {after:.0f} after the restarts, {steady:.0f} before")
        threads = [r["threads"] for r in in_window]
        print(f"threads: {min(threads)}-{max(threads)} in the window (all run: "
              f"{min(r['threads'] for r in rows)}-{max(r['threads'] for r in rows)})")
        if max(threads) - min(threads) > 2:
            failures.append(f"threads varied {min(threads)}-{max(threads)} over the window")
    idle_at = next((t for t, e in events if e == "idle"), None)
    if idle_at is not None:
        idle = [r["fds"] for r in rows if r["t"] >= idle_at]
        if idle:
            print(f"fds with no client: {min(idle)} (fresh server: {a.idle_fds}; bound +8)")
            if min(idle) > a.idle_fds + 8:
                failures.append(f"{min(idle)} fds with no client left, {a.idle_fds} when the server was fresh")
        else:
            print("fds with no client: no sample after the bench ended")
    svg_plot(a.svg, rows, events, window, fit, a.title)
    print(f"plot: {a.svg}")
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes the fuzz seed corpus under Fuzz/corpus/TARGET/ (committed; rerun after changing this file).

wire: header byte (see FuzzInput in Sources/fuzz-wire) + frames of [len_hi, len_lo, bytes], each a
ClientMessage in JSON or, through `protoc --encode`, protobuf binary. The ops are those of
Tests/TabsyncProtoTests/Samples.swift plus sequences that reach the refusals and the rule-7 rekey.
keys: "KEY KEY[ STEPS]" vectors. text: strings with escapes, controls, bidi, emoji and wide text.
"""
import json
import pathlib
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent
PROTO = ROOT.parent / "proto"
OUT = ROOT / "corpus"


def camel(name):
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def to_json(value):
    if isinstance(value, dict):
        return {camel(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def to_text(value, indent=""):
    lines = []
    for k, v in value.items():
        for item in (v if isinstance(v, list) else [v]):
            if isinstance(item, dict):
                lines.append(f"{indent}{k} {{\n{to_text(item, indent + '  ')}{indent}}}\n")
            elif isinstance(item, bool):
                lines.append(f"{indent}{k}: {'true' if item else 'false'}\n")
            elif isinstance(item, int):
                lines.append(f"{indent}{k}: {item}\n")
            else:
                lines.append(f"{indent}{k}: {json.dumps(item, ensure_ascii=False)}\n")
    return "".join(lines)


def encode(message, fmt):
    if fmt == "json":
        return json.dumps(to_json(message), separators=(",", ":"), ensure_ascii=False).encode()
    return subprocess.run(
        ["protoc", f"--proto_path={PROTO}", "--encode=tabsync.v1.ClientMessage", "tabsync/v1/tabsync.proto"],
        input=to_text(message).encode(), capture_output=True, check=True).stdout


def hello(client="c1"):
    return {"hello": {"workspace": "w", "client_id": client}}


def submit(seq, op, base=0):
    s = {"seq": seq, "op": op}
    if base:
        s["base_version"] = base
    return {"submit": s}


def tab(i, **fields):
    return {"id": i, **fields}


FULL = tab("t1", title="Docs — ünïcode", url="https://example.com/a?b=c", icon="📄", badge="3", locked=True, key="a0V")

OPS = [
    {"add": {"tab": FULL, "activate": True}},
    {"add": {"tab": tab("t2"), "place": {"key": "a1V"}}},
    {"add": {"tab": tab("t3"), "place": {"index": 3}, "activate": True}},
    {"add": {"tab": tab("t4"), "place": {"index": 0}}},
    {"open": {"tab": FULL}},
    {"open": {"tab": tab("t5"), "place": {"key": "Zz"}}},
    {"open": {"tab": tab("t6"), "place": {"index": 4294967295}}},
    {"move": {"tab_id": "t1"}},
    {"move": {"tab_id": "t1", "place": {"key": "a0G"}}},
    {"move": {"tab_id": "t1", "place": {"index": 1}}},
    {"remove": {"tab_id": "t2"}},
    {"activate": {"tab_id": "t2"}},
    {"activate": {"index": 4}},
    {"activate": {"index": 0}},
    {"update": {"tab_id": "t1", "title": "New"}},
    {"update": {"tab_id": "t1", "url": "", "icon": "", "badge": ""}},
    {"update": {"tab_id": "t1", "title": "T", "url": "u", "icon": "i", "badge": "b", "locked": True}},
    {"update": {"tab_id": "t1", "locked": False}},
    {"set_editable": {"editable": False}},
    {"set_editable": {"editable": True}},
    {"replace": {"tabs": [FULL, tab("t2")]}},
    {"replace": {}},
    {"rekey": {"keys": [{"tab_id": "t1", "key": "a0"}, {"tab_id": "t2", "key": "a1"}]}},
]

SETUP = [{"add": {"tab": tab(f"t{n}"), "activate": n == 1}} for n in range(1, 4)]

SEQUENCES = {
    "every-op": [hello()] + [submit(n + 1, op) for n, op in enumerate(SETUP + OPS)],
    "edits": [hello(), submit(1, SETUP[0]), submit(2, SETUP[1]), submit(3, {"move": {"tab_id": "t2", "place": {"index": 0}}}),
              submit(4, {"activate": {"tab_id": "t1"}}), submit(5, {"remove": {"tab_id": "t1"}}),
              submit(6, {"update": {"tab_id": "t2", "title": "x"}})],
    "refusals": [hello(), submit(0, SETUP[0]), {"submit": {"seq": 1}}, submit(2, {"activate": {}}),
                 submit(3, {"remove": {"tab_id": "nope"}}), submit(4, {"add": {"tab": tab("bad id!")}}),
                 submit(5, {"add": {"tab": tab("t1", title="a\u001b[31mb")}}), submit(6, OPS[-1]),
                 submit(7, {"set_editable": {}}), submit(8, SETUP[0]), submit(9, {"set_editable": {"editable": True}}),
                 submit(10, SETUP[0])],
    "resubmit": [hello(), submit(1, SETUP[0]), submit(1, SETUP[0]), submit(2, {"remove": {"tab_id": "x"}}),
                 submit(2, SETUP[1]), hello("c2"), submit(1, SETUP[1]), hello("c1"), submit(1, SETUP[2])],
    "long-keys": [hello(), submit(1, SETUP[0]), submit(2, SETUP[1]),
                  submit(3, {"add": {"tab": tab("t3"), "place": {"key": "a0" + "V" * 70}}}),
                  submit(4, {"move": {"tab_id": "t1", "place": {"key": "a0" + "W" * 66}}}, base=2),
                  submit(5, {"add": {"tab": tab("t4"), "place": {"key": "a0" + "V" * 126}}}, base=3),
                  submit(6, {"add": {"tab": tab("t5"), "place": {"key": "a0" + "V" * 127}}})],
    "focus": [hello(), {"focus": {"tab_id": "t1"}}, {}, submit(1, SETUP[0])],
}


def frames_input(header, frames):
    out = bytearray([header])
    for f in frames:
        out += len(f).to_bytes(2, "big") + f
    return bytes(out)


def write(target, name, data):
    (OUT / target).mkdir(parents=True, exist_ok=True)
    (OUT / target / name).write_bytes(data)


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    for fmt, bit in (("json", 0), ("proto", 1)):
        for name, messages in SEQUENCES.items():
            frames = [encode(m, fmt) for m in messages]
            write("wire", f"{fmt}-{name}", frames_input(bit, frames))
        # Small limits, tabs to start with: maxTabs 3 with 3 tabs, retention 1; maxTabs 8, retention 4, 5 tabs.
        ops = [encode(hello(), fmt)] + [encode(submit(n + 1, op), fmt) for n, op in enumerate(OPS)]
        write("wire", f"{fmt}-small-limits", frames_input(bit | 1 << 1 | 1 << 3 | 3 << 5, ops))
        write("wire", f"{fmt}-start-tabs", frames_input(bit | 2 << 1 | 2 << 3 | 5 << 5, ops))
        for n, op in enumerate(OPS):
            write("wire", f"{fmt}-op-{n:02}", frames_input(bit | 7 << 5, [encode(submit(10, op), fmt)]))

    keys = ["a0 a1", "a0 a0V", "a0V a1", "Zz a0", "a0 b00", "Zy Zz", "A00000000000000000000000001 a0",
            "zzzzzzzzzzzzzzzzzzzzzzzzzzz a0", "a0 zzzzzzzzzzzzzzzzzzzzzzzzzzz",
            "a0 a01", "a0001 a0002", "a0z a1", "b12 b13 0101", "a0 a1 00000000000000000000", "a0 a1 11111111111111111111",
            "a0V a0W 0110100110010110", "Zz0001 Zz0002 10"]
    for n, k in enumerate(keys):
        write("keys", f"vector-{n:02}", k.encode())

    texts = ["plain title", "a\u001b[31mred\u001b[0m", "\u009b2J clear", "\u202eevil\u202c", "\u2066iso\u2069",
             "tab\tnew\nline\r", "\u2028sep\u2029", "emoji 👩\u200d💻 ✔\ufe0f", "漢字とカナ", "zero\u200bwidth",
             "\u00adsoft", "\u0000nul\u007fdel", "e\u0301 combining", "\U000e0041tag", "\ufeffbom",
             "\u0085nel \u0080"]
    for n, t in enumerate(texts):
        write("text", f"sample-{n:02}", t.encode("utf-8", "surrogatepass"))
    write("text", "invalid-utf8", b"\xff\xfe\x1b[\xc0\x80 \xed\xa0\x80")


if __name__ == "__main__":
    main()

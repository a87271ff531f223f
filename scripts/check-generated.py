#!/usr/bin/env python3
"""Compares the committed Swift generated from a .proto with protoc's descriptor of that .proto.

Usage: check-generated.py DESCRIPTOR_SET GENERATED_SWIFT

DESCRIPTOR_SET is `protoc --descriptor_set_out` of the .proto; GENERATED_SWIFT is what
protoc-gen-swift (swift-protobuf 1.39) made from it. Compared, in both directions: every message and
enum (by full name); per message, every field's number, proto name, JSON name, type (scalar kind,
or the message or enum it holds), cardinality (singular, repeated, packed) and oneof; per enum,
every value's number and name. Not compared: comments, options other than packing, services.
Prints the differences and exits 1, or exits 0 when there are none.
"""
import re
import sys

# ------------------------------------------------------------------ descriptor (protobuf wire format)


def varint(buf, i):
    value, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def wire_fields(buf):
    """[(field number, value)]: an int for varints, bytes for everything else."""
    out, i = [], 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            length, i = varint(buf, i)
            value, i = buf[i:i + length], i + length
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type %d in the descriptor" % wire)
        out.append((number, value))
    return out


def first(fields, number, default=None):
    for n, v in fields:
        if n == number:
            return v
    return default


def every(fields, number):
    return [v for n, v in fields if n == number]


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


# FieldDescriptorProto.Type -> the name protoc-gen-swift uses in visitSingular<Name>Field.
SCALARS = {1: "Double", 2: "Float", 3: "Int64", 4: "UInt64", 5: "Int32", 6: "Fixed64", 7: "Fixed32",
           8: "Bool", 9: "String", 10: "Group", 11: "Message", 12: "Bytes", 13: "UInt32", 14: "Enum",
           15: "SFixed32", 16: "SFixed64", 17: "SInt32", 18: "SInt64"}
PACKABLE = {1, 2, 3, 4, 5, 6, 7, 8, 13, 14, 15, 16, 17, 18}


def json_name(proto_name):
    """protoc's default JSON name: underscores dropped, the letter after one upper-cased."""
    out, upper = [], False
    for c in proto_name:
        if c == "_":
            upper = True
        else:
            out.append(c.upper() if upper else c)
            upper = False
    return "".join(out)


def describe(descriptor_set):
    """{full name: fields} for messages, {full name: {number: name}} for enums, from the descriptor."""
    messages, enums = {}, {}

    def add_enum(prefix, raw):
        e = wire_fields(raw)
        values = {}
        for v in every(e, 2):
            vf = wire_fields(v)
            number = first(vf, 2, 0)
            if number >= 1 << 63:
                number -= 1 << 64
            values[number] = text(first(vf, 1))
        enums[prefix + text(first(e, 1))] = values

    def add_message(prefix, raw):
        m = wire_fields(raw)
        name = prefix + text(first(m, 1))
        oneofs = [text(first(wire_fields(o), 1)) for o in every(m, 8)]
        fields = {}
        for f in every(m, 2):
            ff = wire_fields(f)
            kind = first(ff, 5)
            label = first(ff, 4, 1)
            oneof_index = first(ff, 9)
            synthetic = first(ff, 17, 0) == 1  # proto3 `optional`: a oneof of one, not a real oneof
            options = wire_fields(first(ff, 8, b""))
            if label == 3:
                packed = first(options, 2, 1) == 1  # proto3: packed unless [packed = false]
                cardinality = "Packed" if kind in PACKABLE and packed else "Repeated"
            else:
                cardinality = "Singular"
            type_name = text(first(ff, 6, b"")).lstrip(".")
            fields[first(ff, 3)] = {
                "name": text(first(ff, 1)),
                "json": text(first(ff, 10, b"")) or json_name(text(first(ff, 1))),
                "type": SCALARS[kind] + (":" + type_name if type_name else ""),
                "cardinality": cardinality,
                "oneof": json_name(oneofs[oneof_index]) if oneof_index is not None and not synthetic else None,
            }
        messages[name] = fields
        for nested in every(m, 3):
            add_message(name + ".", nested)
        for nested in every(m, 4):
            add_enum(name + ".", nested)

    for file in every(wire_fields(descriptor_set), 1):
        f = wire_fields(file)
        if text(first(f, 12, b"proto2")) != "proto3":
            raise ValueError("this check knows proto3 files only")
        package = text(first(f, 2, b""))
        prefix = package + "." if package else ""
        for raw in every(f, 4):
            add_message(prefix, raw)
        for raw in every(f, 5):
            add_enum(prefix, raw)
    return messages, enums


# ------------------------------------------------------------------ generated Swift


def swift_string(literal):
    """The bytes of a Swift string literal's body (the escapes protoc-gen-swift writes)."""
    out = bytearray()
    i = 0
    while i < len(literal):
        c = literal[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        nxt = literal[i + 1]
        if nxt == "u":
            end = literal.index("}", i)
            out += chr(int(literal[i + 3:end], 16)).encode("utf-8")
            i = end + 1
        else:
            out += {"0": b"\0", "\\": b"\\", '"': b'"', "'": b"'", "n": b"\n", "t": b"\t", "r": b"\r"}[nxt]
            i += 2
    return bytes(out)


def name_map(bytecode):
    """{number: (proto name, JSON name)} from a `_NameMap(bytecode:)` program (swift-protobuf 1.39)."""
    program = swift_string(bytecode)
    i = 0

    def integer():
        nonlocal i
        b = program[i]
        i += 1
        if not b & 0x40:
            return b
        value, shift = b & 0x3F, 6
        while True:
            b = program[i]
            i += 1
            value |= (b & 0x3F) << shift
            if not b & 0x40:
                return value
            shift += 6

    def string():
        nonlocal i
        end = program.index(b"\0", i)
        s = program[i:end].decode("utf-8")
        i = end + 1
        return s

    if integer() != 0:
        raise ValueError("unknown bytecode program format")
    names, number = {}, 0
    while i < len(program):
        op = integer()
        if op in (1, 3, 5, 9):
            number += 1
        elif op in (2, 4, 6, 10):
            delta = integer()
            number += delta - (1 << 32) if delta >= 1 << 31 else delta
        else:
            raise ValueError("name-map opcode %d is not known to this check: extend scripts/check-generated.py" % op)
        if op in (1, 2):
            n = string()
            names[number] = (n, n)
        elif op in (3, 4):
            n = string()
            names[number] = (n, json_name(n))
        elif op in (5, 6):
            n = string()
            names[number] = (n, string())
        else:  # enum value with aliases
            aliases = integer()
            n = string()
            for _ in range(aliases):
                string()
            names[number] = (n, n)
    return names


def blocks(source, opener):
    """{type name: body} for every top-level `opener TypeName ... {` ... `}` in the file."""
    out = {}
    for m in re.finditer(r"^(?:public )?(?:nonisolated )?" + opener + r" ([\w.]+)\b[^{\n]*\{\n(.*?)^\}$", source, re.S | re.M):
        out.setdefault(m.group(1), "")
        out[m.group(1)] += m.group(2)
    return out


def generated(source):
    """The same shapes as describe(), read from protoc-gen-swift's output."""
    package = re.search(r'_protobuf_package = "([^"]*)"', source).group(1)
    structs = blocks(source, "struct")
    extensions = blocks(source, "extension")
    swift_to_proto = {}
    messages, enums = {}, {}

    for swift, body in extensions.items():
        m = re.search(r"protoMessageName: String = (_protobuf_package|[\w.]+\.protoMessageName) \+ \"\.(\w+)\"", body)
        if m:
            parent = package if m.group(1) == "_protobuf_package" else swift_to_proto.get(m.group(1)[: -len(".protoMessageName")], "?")
            swift_to_proto[swift] = parent + "." + m.group(2)
    for swift, body in extensions.items():
        if swift not in swift_to_proto and "_protobuf_nameMap" in body and "SwiftProtobuf.Enum" not in body:
            # Enums: the name follows protoc-gen-swift's convention (Package_Parts_Outer.Name).
            parts = swift.split(".")
            parent = ".".join(parts[:-1])
            leaf = parts[-1]
            prefix = "".join(p[:1].upper() + p[1:] + "_" for p in package.split("."))
            if parent:
                swift_to_proto[swift] = swift_to_proto.get(parent, "?") + "." + leaf
            elif leaf.startswith(prefix):
                swift_to_proto[swift] = package + "." + leaf[len(prefix):]

    def proto_type(swift_type):
        bare = swift_type.strip("[]?")
        return swift_to_proto.get(bare, "unknown Swift type " + bare)

    for swift, body in extensions.items():
        nm = re.search(r'_protobuf_nameMap = SwiftProtobuf\._NameMap\(bytecode: "((?:[^"\\]|\\.)*)"\)', body)
        if swift not in swift_to_proto or not nm:
            continue
        names = name_map(nm.group(1))
        full = swift_to_proto[swift]
        if "protoMessageName" not in body:
            enums[full] = {number: proto for number, (proto, _) in names.items()}
            continue
        struct = structs.get(swift, "")
        decode = body[body.index("func decodeMessage"):body.index("func traverse")] if "func traverse" in body else ""
        cases = dict(re.findall(r"^      case (\d+): (.*?)(?=^      case \d+:|^      default:)", decode, re.S | re.M))
        fields = {}
        for kind_cardinality, kind, number in re.findall(
                r"visitor\.visit(Singular|Repeated|Packed)(\w+?)Field\(value: [^,]+, fieldNumber: (\d+)\)",
                body[body.index("func traverse"):] if "func traverse" in body else ""):
            number = int(number)
            proto_name, json = names.get(number, ("?", "?"))
            case = cases.get(str(number), "")
            target = None
            oneof = None
            v = re.search(r"var v: ([\w.\[\]]+)\?", case)
            if v:
                target = v.group(1)
                o = re.search(r"self\.(\w+) = \.\w+\(v\)", case)
                oneof = o.group(1) if o else "?"
            else:
                p = re.search(r"value: &self\.(\w+)\)", case)
                if p:
                    decl = re.search(r"var " + re.escape(p.group(1)) + r": ([\w.\[\]]+)", struct)
                    target = decl.group(1) if decl else "?"
            type_name = kind
            if kind in ("Message", "Enum"):
                type_name += ":" + proto_type(target or "?")
            fields[number] = {"name": proto_name, "json": json, "type": type_name,
                              "cardinality": kind_cardinality, "oneof": oneof}
        for number in names:
            fields.setdefault(number, {"name": names[number][0], "json": names[number][1], "type": "not traversed",
                                       "cardinality": "?", "oneof": None})
        messages[full] = fields
    return messages, enums


# ------------------------------------------------------------------ comparison


def main():
    descriptor_path, swift_path = sys.argv[1], sys.argv[2]
    want_messages, want_enums = describe(open(descriptor_path, "rb").read())
    have_messages, have_enums = generated(open(swift_path, encoding="utf-8").read())
    problems = []
    for kind, want, have in (("message", want_messages, have_messages), ("enum", want_enums, have_enums)):
        for name in sorted(set(want) - set(have)):
            problems.append("%s %s is in the .proto, not in the generated code" % (kind, name))
        for name in sorted(set(have) - set(want)):
            problems.append("%s %s is in the generated code, not in the .proto" % (kind, name))
    for name in sorted(set(want_messages) & set(have_messages)):
        want, have = want_messages[name], have_messages[name]
        for number in sorted(set(want) | set(have)):
            w, h = want.get(number), have.get(number)
            if w is None or h is None:
                where = "the .proto" if w is None else "the generated code"
                problems.append("%s field %d (%s) is missing from %s" % (name, number, (w or h)["name"], where))
                continue
            for key in ("name", "json", "type", "cardinality", "oneof"):
                if w[key] != h[key]:
                    problems.append("%s field %d: %s is %r in the .proto, %r in the generated code"
                                    % (name, number, key, w[key], h[key]))
    for name in sorted(set(want_enums) & set(have_enums)):
        if want_enums[name] != have_enums[name]:
            problems.append("enum %s: values %s in the .proto, %s in the generated code"
                            % (name, sorted(want_enums[name].items()), sorted(have_enums[name].items())))
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    fields = sum(len(m) for m in want_messages.values())
    values = sum(len(e) for e in want_enums.values())
    print("%d messages (%d fields) and %d enums (%d values) match" % (len(want_messages), fields, len(want_enums), values))


if __name__ == "__main__":
    main()

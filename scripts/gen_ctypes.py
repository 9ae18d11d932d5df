#!/usr/bin/env python3
"""gen_ctypes.py: generates the ctypes declarations of the C ABI from include/cudaep.h.

    python3 scripts/gen_ctypes.py            # rewrites python/cudaep/_cudaep_h.py
    python3 scripts/gen_ctypes.py --check    # fails, printing the diff, when it is stale

The generated module holds, for everything the header declares (read by scripts/cheader.py):
its integer macros and enumerators as constants, each enum's members without their shared
prefix (ENUMS, for enum.IntEnum), its handle typedefs and structs as ctypes types (STRUCTS),
and the restype and argtypes of every function (FUNCTIONS; STATUS_FUNCTIONS names those that
return a CudaEpStatus*). python/cudaep/_native.py applies them to the loaded library.

A function, enum value or struct appended to the header is picked up by running this again;
a type it cannot map is an error naming the declaration. python/tests/test_generated.py fails
when the committed file differs from what this would write.
"""

import argparse
import difflib
import os
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cheader  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADER = os.path.join(ROOT, "include", "cudaep.h")
OUTPUT = os.path.join(ROOT, "python", "cudaep", "_cudaep_h.py")

#: How to regenerate, as the generated file's first line and the freshness test say it.
COMMAND = "python3 scripts/gen_ctypes.py"

SCALARS = {
    "char": "ctypes.c_char", "int": "ctypes.c_int", "float": "ctypes.c_float", "double": "ctypes.c_double",
    "size_t": "ctypes.c_size_t",
    "int8_t": "ctypes.c_int8", "uint8_t": "ctypes.c_uint8", "int16_t": "ctypes.c_int16",
    "uint16_t": "ctypes.c_uint16", "int32_t": "ctypes.c_int32", "uint32_t": "ctypes.c_uint32",
    "int64_t": "ctypes.c_int64", "uint64_t": "ctypes.c_uint64",
}

WIDTH = 110


class GenError(Exception):
    pass


class Mapper:
    """Maps C types of the header to ctypes expressions of the generated module."""

    def __init__(self, header):
        self.h = header
        self.defined = set()  # structs already emitted

    def expr(self, ctype, where, result=False):
        base, depth = cheader.base_type(ctype), cheader.pointer_depth(ctype)
        if depth == 0:
            if base == "void" and result:
                return "None"
            if base in SCALARS:
                return SCALARS[base]
            if base in self.h.typedefs or base in self.h.enums:
                return base
            st = self.h.structs.get(base)
            if st is not None and not st.opaque:
                if base not in self.defined:
                    raise GenError(f"{where}: {base} is used before the header defines it")
                return base
            raise GenError(f"{where}: no ctypes mapping for {ctype!r}")
        st = self.h.structs.get(base)
        if depth == 1 and (base == "void" or (st is not None and st.opaque)):
            return "ctypes.c_void_p"
        if depth == 1 and base == "char":
            return "ctypes.c_char_p"
        inner = ctype[: ctype.rindex("*")].strip()
        return f"ctypes.POINTER({self.expr(inner, where)})"


def wrap(head, items, tail, indent):
    """head + items joined by ", " + tail, broken before WIDTH columns; continuation lines
    start with indent (a number of spaces, or a prefix)."""
    prefix = " " * indent if isinstance(indent, int) else indent
    line = head + ", ".join(items) + tail
    if len(line) <= WIDTH:
        return [line]
    lines, cur, fresh = [], head, True
    for i, item in enumerate(items):
        piece = item + (", " if i + 1 < len(items) else tail)
        if not fresh and len(cur) + len(piece.rstrip()) > WIDTH:
            lines.append(cur.rstrip())
            cur = prefix
        cur += piece
        fresh = False
    lines.append(cur.rstrip())
    return lines


def struct_lines(m, st, pyname, out):
    """Emits st (and first its nested anonymous aggregates) as a ctypes class."""
    fields = []
    for f in st.fields:
        where = f"{st.name or pyname}.{f.name}"
        if f.aggregate is not None:
            inner = f"_{pyname}_{f.name}"
            struct_lines(m, f.aggregate, inner, out)
            t = inner
        else:
            t = m.expr(f.type, where)
        if f.array is not None:
            t = f"{t} * {f.array}"
        fields.append(f'("{f.name}", {t})')
    base = "ctypes.Union" if st.kind == "union" else "ctypes.Structure"
    out.append(f"class {pyname}({base}):")
    out.append(f'    """{st.kind} {st.name}."""' if st.name else f'    """The anonymous {st.kind} of {pyname[1:].replace("_", ".", 1)}."""')
    out.append("")
    out.extend(wrap("    _fields_ = [", fields, "]", 16))
    out.append("")
    out.append("")
    m.defined.add(pyname)


def prototype_comment(fn):
    """The function's C prototype as comment lines."""
    params = [" ".join(x for x in (p.annotation, p.type, p.name) if x) for p in fn.params] or ["void"]
    return wrap(f"    # {fn.returns} {fn.name}(", params, ")", "    #     ")


def generate(header_text):
    """The generated module's text for header_text."""
    try:
        h = cheader.parse(header_text)
    except cheader.HeaderError as e:
        raise GenError(f"include/cudaep.h: {e}") from e
    m = Mapper(h)
    exported = []
    out = [
        f"# Code generated by {COMMAND}; DO NOT EDIT.",
        '"""The ctypes declarations of include/cudaep.h, generated from the header by scripts/gen_ctypes.py.',
        "",
        "Edit the header, then regenerate this file; python/tests/test_generated.py fails while it is stale.",
        "python/cudaep/_native.py applies FUNCTIONS to the loaded library.",
        '"""',
        "",
        "import ctypes",
        "",
        "# Integer macros.",
    ]
    for name, value in h.constants.items():
        out.append(f"{name} = {value}")
        exported.append(name)
    out.append("")

    for kind, name in h.order:
        if kind == "typedef":
            out.append(f"# typedef {h.typedefs[name]} {name}")
            out.append(f"{name} = {m.expr(h.typedefs[name], 'typedef ' + name)}")
            out.append("")
            exported.append(name)
        elif kind == "enum":
            e = h.enums[name]
            out.append(f"# enum {name} (the header pins enums at 32 bits)")
            out.append(f"{name} = ctypes.c_int")
            for n, v in e.members:
                out.append(f"{n} = {v}")
                exported.append(n)
            out.append("")
            exported.append(name)
        elif kind in ("struct", "union") and not h.structs[name].opaque:
            out.append("")
            struct_lines(m, h.structs[name], name, out)
            exported.append(name)

    out.append("#: Every enum's members, in order, without the prefix of whole words they share (for enum.IntEnum).")
    out.append("ENUMS = {")
    for e in h.enums.values():
        members = [f'("{n}", {v})' for n, v in e.short_members()]
        out.extend(wrap(f'    "{e.name}": (', members, "),", 8))
    out.append("}")
    out.append("")
    out.append("#: Every struct with a layout, by its C name.")
    structs = [f'"{s.name}": {s.name}' for s in h.structs.values() if not s.opaque]
    out.extend(wrap("STRUCTS = {", structs, "}", 11))
    out.append("")
    out.append("#: Every function of the header, in order: name -> (restype, argtypes).")
    out.append("FUNCTIONS = {")
    for fn in h.functions:
        restype = m.expr(fn.returns, f"{fn.name}'s result", result=True)
        args = [m.expr(p.type, f"{fn.name}'s parameter {p.name}") for p in fn.params]
        out.extend(prototype_comment(fn))
        out.extend(wrap(f'    "{fn.name}": ({restype}, [', args, "]),", 8))
    out.append("}")
    out.append("")
    out.append("#: The functions that return a CudaEpStatus* (NULL on success).")
    status = [f'"{fn.name}"' for fn in h.functions if fn.returns_status]
    out.extend(wrap("STATUS_FUNCTIONS = frozenset({", status, "})", 4))
    out.append("")
    names = [f'"{n}"' for n in exported + ["ENUMS", "STRUCTS", "FUNCTIONS", "STATUS_FUNCTIONS"]]
    out.extend(wrap("__all__ = [", names, "]", 4))
    text = "\n".join(out) + "\n"
    while "\n\n\n\n" in text:  # at most two blank lines between definitions
        text = text.replace("\n\n\n\n", "\n\n\n")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--header", default=HEADER)
    ap.add_argument("--out", default=OUTPUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    a = ap.parse_args()
    try:
        with open(a.header, encoding="utf-8") as f:
            text = generate(f.read())
    except GenError as e:
        print(f"gen_ctypes.py: {e}", file=sys.stderr)
        return 1
    if a.check:
        try:
            with open(a.out, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True), a.out,
                                                       "generated"))
            print(f"gen_ctypes.py: {a.out} is stale; regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"gen_ctypes.py: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""cheader: the one reader of include/cudaep.h.

Every tool that needs the C ABI's declarations reads them through this module, so they agree on
what the header says: the misuse test generator (ctests/misuse/gen_misuse.py), the Python
bindings generator (scripts/gen_ctypes.py) and the Python tests (python/tests).

    import cheader
    h = cheader.parse_file("include/cudaep.h")
    for fn in h.functions:
        print(fn.returns, fn.name, [(p.annotation, p.type, p.name) for p in fn.params])

It reads the subset of C the header is written in and refuses anything else with a HeaderError
naming the line, so a construct it does not understand is never silently skipped:

  * object-like #defines (integer ones become ``constants``), #if/#ifdef/#elif/#else/#endif
    (C, not C++: ``__cplusplus`` is undefined; other conditions take their first branch);
  * ``typedef enum``, ``typedef struct``/``union`` (with a body, anonymous nested unions or
    structs, several declarators per field and fixed arrays; or opaque), scalar typedefs;
  * ``CUDAEP_API`` function prototypes whose parameters may carry one annotation
    (CUDAEP_IN, CUDAEP_IN_OPT, CUDAEP_OUT, CUDAEP_OUT_OPT, CUDAEP_INOUT);
  * ``CUDAEP_STATIC_ASSERT`` layout pins: ``sizeof(T) == N`` and ``offsetof(T, f) == N``.

Types are kept as normalized C text: tokens joined by one space, each ``*`` attached to what
precedes it ("const char* const*"). Python 3.11 standard library only.
"""

import dataclasses
import re

#: The parameter annotations of the header (see its "Parameter annotations").
ANNOTATIONS = ("CUDAEP_IN", "CUDAEP_IN_OPT", "CUDAEP_OUT", "CUDAEP_OUT_OPT", "CUDAEP_INOUT")

#: The macro that marks every function of the ABI.
API_MACRO = "CUDAEP_API"

#: The macro whose arguments pin layouts.
STATIC_ASSERT_MACRO = "CUDAEP_STATIC_ASSERT"

#: Scalar C types the header builds on (from <stdint.h>, <stddef.h> and the language).
BUILTIN_TYPES = frozenset({
    "void", "char", "int", "float", "double", "size_t",
    "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
})


class HeaderError(Exception):
    """The header holds something this reader does not understand."""


# --- the model ------------------------------------------------------------------------------


def _is_pointer(ctype):
    return ctype.endswith("*")


def base_type(ctype):
    """The type without qualifiers and pointers: "const char* const*" -> "char"."""
    words = [w for w in ctype.replace("*", " ").split() if w != "const"]
    return " ".join(words)


def pointer_depth(ctype):
    """How many pointers the type has: "const char* const*" -> 2."""
    return ctype.count("*")


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of a function."""

    name: str
    type: str  # normalized C type, without the annotation
    annotation: str | None  # one of ANNOTATIONS, or None

    @property
    def pointer(self):
        return _is_pointer(self.type)

    @property
    def pointee(self):
        """The type a pointer parameter points at ("const char* const*" -> "const char*")."""
        if not self.pointer:
            raise ValueError(f"{self.name} is not a pointer")
        return self.type[: self.type.rindex("*")].strip()

    @property
    def base(self):
        return base_type(self.type)


@dataclasses.dataclass(frozen=True)
class Function:
    """One CUDAEP_API function."""

    name: str
    returns: str  # normalized C type
    params: tuple  # of Param
    attributes: tuple  # the macros between CUDAEP_API and the return type, e.g. CUDAEP_MUST_USE
    line: int

    @property
    def returns_status(self):
        return self.returns.replace(" ", "") == "CudaEpStatus*"

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name}")


@dataclasses.dataclass(frozen=True)
class Enum:
    """A typedef'd enum and its enumerators, in declaration order."""

    name: str
    members: tuple  # of (name, value)
    line: int

    def short_members(self):
        """The enumerators without the longest prefix of whole words (``_``-separated) that they
        all share, as long as every shortened name stays a valid identifier:
        CUDAEP_DTYPE_FLOAT32 -> FLOAT32."""
        names = [n for n, _ in self.members]
        words = [n.split("_") for n in names]
        common = 0
        if len(words) > 1:
            while all(len(w) > common + 1 for w in words) and len({tuple(w[: common + 1]) for w in words}) == 1:
                common += 1
        else:
            common = 1 if len(words[0]) > 1 and words[0][0] == "CUDAEP" else 0
        while common and any(w[common][:1].isdigit() for w in words):
            common -= 1
        return tuple(("_".join(w[common:]), v) for w, (_, v) in zip(words, self.members))


@dataclasses.dataclass(frozen=True)
class Field:
    """One member of a struct or union. A nested anonymous aggregate has ``aggregate`` set (and
    ``type`` is "union" or "struct")."""

    name: str
    type: str
    array: int | None = None
    aggregate: "Struct | None" = None


@dataclasses.dataclass(frozen=True)
class Struct:
    """A typedef'd struct or union. ``opaque`` ones have no fields (the caller only holds
    pointers to them)."""

    name: str
    kind: str  # "struct" or "union"
    fields: tuple  # of Field
    opaque: bool
    line: int


@dataclasses.dataclass(frozen=True)
class SizePin:
    """A static assertion ``sizeof(type) == size``."""

    type: str
    size: int


@dataclasses.dataclass(frozen=True)
class OffsetPin:
    """A static assertion ``offsetof(type, field) == offset``."""

    type: str
    field: str
    offset: int


@dataclasses.dataclass
class Header:
    """What the header declares, each list in declaration order."""

    functions: list = dataclasses.field(default_factory=list)
    enums: dict = dataclasses.field(default_factory=dict)  # name -> Enum
    structs: dict = dataclasses.field(default_factory=dict)  # name -> Struct
    typedefs: dict = dataclasses.field(default_factory=dict)  # name -> C type (scalar typedefs)
    defines: dict = dataclasses.field(default_factory=dict)  # object-like macro -> its text
    constants: dict = dataclasses.field(default_factory=dict)  # integer macro -> value
    size_pins: list = dataclasses.field(default_factory=list)
    offset_pins: list = dataclasses.field(default_factory=list)
    order: list = dataclasses.field(default_factory=list)  # (kind, name) of every declaration

    def function(self, name):
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"the header declares no function {name}")

    @property
    def handles(self):
        """The handle types: typedefs of uint64_t (opaque 64-bit handles, by the header's
        conventions)."""
        return frozenset(n for n, t in self.typedefs.items() if t == "uint64_t")

    @property
    def enum_constants(self):
        """Every enumerator of every enum, name -> value."""
        return {n: v for e in self.enums.values() for n, v in e.members}

    def known_type(self, name):
        return name in BUILTIN_TYPES or name in self.typedefs or name in self.enums or name in self.structs


# --- preprocessing --------------------------------------------------------------------------


def _strip_comments(text):
    """Replaces comments with spaces (keeping their newlines, so line numbers stay right)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise HeaderError(f"line {text.count(chr(10), 0, i) + 1}: unterminated comment")
            out.append(re.sub(r"[^\n]", " ", text[i : j + 2]))
            i = j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_DEFINE = re.compile(r"^([A-Za-z_]\w*)(\()?\s*(.*)$", re.S)


def _condition(text):
    """True, False, or None (unknown) for a #if expression, evaluating only __cplusplus."""
    t = text.strip()
    if re.fullmatch(r"defined\s*\(?\s*__cplusplus\s*\)?", t):
        return False
    if re.fullmatch(r"!\s*defined\s*\(?\s*__cplusplus\s*\)?", t):
        return True
    return None


def _preprocess(text, header):
    """Returns the text with directives and inactive lines blanked; records #defines."""
    lines = _strip_comments(text).split("\n")
    # Join continuation lines onto their first line, leaving the others empty.
    i = 0
    while i < len(lines):
        j = i
        while lines[i].rstrip().endswith("\\") and j + 1 < len(lines):
            j += 1
            lines[i] = lines[i].rstrip()[:-1] + " " + lines[j]
            lines[j] = ""
        i = j + 1
    # stack of (this branch active, some branch of the group taken, enclosing active)
    stack = []
    active = True
    for no, line in enumerate(lines):
        m = _DIRECTIVE.match(line)
        if not m:
            if not active:
                lines[no] = ""
            continue
        lines[no] = ""
        word, rest = m.group(1), m.group(2).strip()
        if word in ("if", "ifdef", "ifndef"):
            if word == "ifdef":
                cond = False if rest == "__cplusplus" else (True if rest in header.defines else None)
            elif word == "ifndef":
                cond = True if rest == "__cplusplus" else (rest not in header.defines)
            else:
                cond = _condition(rest)
            take = cond is not False  # unknown: the first branch
            stack.append([take, take, active])
            active = active and take
        elif word in ("elif", "else"):
            if not stack:
                raise HeaderError(f"line {no + 1}: #{word} without #if")
            frame = stack[-1]
            cond = True if word == "else" else _condition(rest)
            take = not frame[1] and cond is not False
            frame[0] = take
            frame[1] = frame[1] or take
            active = frame[2] and take
        elif word == "endif":
            if not stack:
                raise HeaderError(f"line {no + 1}: #endif without #if")
            active = stack.pop()[2]
        elif not active:
            continue
        elif word == "define":
            d = _DEFINE.match(rest)
            if not d:
                raise HeaderError(f"line {no + 1}: cannot read #define {rest!r}")
            if d.group(2):  # function-like: not a value
                continue
            name, value = d.group(1), d.group(3).strip()
            header.defines.setdefault(name, value)
            iv = _int_value(value)
            if iv is not None:
                header.constants.setdefault(name, iv)
        elif word in ("include", "undef", "pragma", "error", "warning"):
            continue
        else:
            raise HeaderError(f"line {no + 1}: unknown directive #{word}")
    if stack:
        raise HeaderError("unterminated #if")
    return "\n".join(lines)


_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|\d+)[uUlL]*")


def _int_value(text):
    """The value of an integer constant expression of the forms the header uses: a literal,
    in parentheses, possibly cast to an integer type: ``((uint64_t)0)``. None otherwise."""
    t = text.replace(" ", "")
    while True:
        m = re.fullmatch(r"\((.*)\)", t)
        if m and _balanced(m.group(1)):
            t = m.group(1)
            continue
        m = re.fullmatch(r"\(([A-Za-z_]\w*)\)(.+)", t)
        if m and m.group(1) in BUILTIN_TYPES:
            t = m.group(2)
            continue
        break
    m = _INT.fullmatch(t)
    if not m:
        return None
    v = int(m.group(2), 0) if not re.fullmatch(r"0\d+", m.group(2)) else int(m.group(2), 8)
    return -v if m.group(1) == "-" else v


def _balanced(s):
    depth = 0
    for c in s:
        depth += c == "("
        depth -= c == ")"
        if depth < 0:
            return False
    return depth == 0


# --- tokens ---------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\f\v]+)|(?P<nl>\n)
    |(?P<id>[A-Za-z_]\w*)
    |(?P<num>0[xX][0-9a-fA-F]+[uUlL]*|\d+(?:\.\d+)?[uUlLfF]*)
    |(?P<str>"(?:\\.|[^"\\])*")|(?P<chr>'(?:\\.|[^'\\])*')
    |(?P<op>==|!=|<=|>=|&&|\|\||<<|>>|->|\#\#|[{}()\[\];,*=&|<>+\-/!~?:.%^\#])""",
    re.X,
)


@dataclasses.dataclass(frozen=True)
class _Tok:
    text: str
    kind: str
    line: int


def _tokens(text):
    out, line, pos = [], 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise HeaderError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind == "nl":
            line += 1
        elif kind != "ws":
            out.append(_Tok(m.group(), kind, line))
        pos = m.end()
    return out


class _Stream:
    def __init__(self, toks):
        self.toks, self.i = toks, 0

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self):
        t = self.peek()
        if t is None:
            raise HeaderError("unexpected end of the header")
        self.i += 1
        return t

    def expect(self, text):
        t = self.next()
        if t.text != text:
            raise HeaderError(f"line {t.line}: expected {text!r}, found {t.text!r}")
        return t

    def until(self, text):
        """The tokens up to (not including) text at bracket depth 0; consumes text."""
        out, depth = [], 0
        while True:
            t = self.next()
            if t.text == text and depth == 0:
                return out
            depth += t.text in "({["
            depth -= t.text in ")}]"
            if depth < 0:
                raise HeaderError(f"line {t.line}: unbalanced {t.text!r}")
            out.append(t)


def _split(toks, sep=","):
    parts, cur, depth = [], [], 0
    for t in toks:
        if t.text == sep and depth == 0:
            parts.append(cur)
            cur = []
            continue
        depth += t.text in "({["
        depth -= t.text in ")}]"
        cur.append(t)
    parts.append(cur)
    return parts


def _type_text(toks):
    out = ""
    for t in toks:
        if t.text == "*":
            out += "*"
        else:
            out += (" " if out else "") + t.text
    return out


# --- declarations ---------------------------------------------------------------------------


def parse(text):
    """Reads header text into a Header. Raises HeaderError for what it cannot read."""
    h = Header()
    s = _Stream(_tokens(_preprocess(text, h)))
    for a in ANNOTATIONS:
        if h.defines.get(a, None) != "":
            raise HeaderError(f"the header does not define the annotation {a} as an empty macro")
    while s.peek() is not None:
        t = s.peek()
        if t.text == "typedef":
            _typedef(s, h)
        elif t.text == API_MACRO:
            _function(s, h)
        elif t.text == STATIC_ASSERT_MACRO:
            _static_assert(s, h)
        elif t.text == ";":
            s.next()
        else:
            raise HeaderError(f"line {t.line}: cannot read the declaration starting {t.text!r}")
    _check_types(h)
    return h


def parse_file(path):
    """Reads the header at path."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read())


def _name(t, what):
    if t.kind != "id":
        raise HeaderError(f"line {t.line}: expected {what}, found {t.text!r}")
    return t.text


def _typedef(s, h):
    line = s.expect("typedef").line
    t = s.peek()
    if t.text == "enum":
        s.next()
        if s.peek().kind == "id":
            s.next()  # the tag
        s.expect("{")
        body = s.until("}")
        name = _name(s.next(), "the enum's typedef name")
        s.expect(";")
        h.enums[name] = Enum(name, _enumerators(body, h), line)
        h.order.append(("enum", name))
    elif t.text in ("struct", "union"):
        kind = s.next().text
        tag = s.next().text if s.peek().kind == "id" else None
        if s.peek().text == "{":
            s.next()
            fields = _fields(s.until("}"), h)
            name = _name(s.next(), f"the {kind}'s typedef name")
            s.expect(";")
            h.structs[name] = Struct(name, kind, fields, False, line)
        else:
            name = _name(s.next(), f"the {kind}'s typedef name")
            s.expect(";")
            if tag is None:
                raise HeaderError(f"line {line}: an opaque {kind} needs a tag")
            h.structs[name] = Struct(name, kind, (), True, line)
        h.order.append((kind, name))
    else:
        toks = s.until(";")
        if len(toks) < 2 or toks[-1].kind != "id" or any(x.text in "()[]" for x in toks):
            raise HeaderError(f"line {line}: cannot read the typedef {_type_text(toks)!r}")
        name = toks[-1].text
        h.typedefs[name] = _type_text(toks[:-1])
        h.order.append(("typedef", name))


def _enumerators(body, h):
    members, nxt, seen = [], 0, {}
    for part in _split(body):
        if not part:
            continue  # a trailing comma
        name = _name(part[0], "an enumerator")
        if len(part) == 1:
            value = nxt
        elif part[1].text == "=" and len(part) > 2:
            expr = "".join(x.text for x in part[2:])
            value = _int_value(expr)
            if value is None:
                value = seen.get(expr, h.enum_constants.get(expr, h.constants.get(expr)))
            if value is None:
                raise HeaderError(f"line {part[0].line}: cannot evaluate {name} = {expr}")
        else:
            raise HeaderError(f"line {part[0].line}: cannot read the enumerator {_type_text(part)!r}")
        members.append((name, value))
        seen[name] = value
        nxt = value + 1
    if not members:
        raise HeaderError("an enum without enumerators")
    return tuple(members)


def _fields(body, h):
    s = _Stream(body)
    fields = []
    while s.peek() is not None:
        t = s.peek()
        if t.text in ("struct", "union") and s.peek(1) is not None and s.peek(1).text == "{":
            kind = s.next().text
            s.expect("{")
            inner = Struct("", kind, _fields(s.until("}"), h), False, t.line)
            for d in _split(s.until(";")):
                name, stars, array = _declarator(d, t.line)
                if stars:
                    raise HeaderError(f"line {t.line}: a pointer to an anonymous {kind}")
                fields.append(Field(name, kind, array, inner))
            continue
        toks = s.until(";")
        parts = _split(toks)
        # The first declarator carries the type: the tokens before its stars and its name.
        first = parts[0]
        k = len(first) - 1
        if first and first[-1].text == "]":
            while k >= 0 and first[k].text != "[":
                k -= 1
            k -= 1
        stars_at = k
        while stars_at > 0 and first[stars_at - 1].text == "*":
            stars_at -= 1
        base = first[:stars_at]
        if k < 0 or not base:
            raise HeaderError(f"line {t.line}: cannot read the field {_type_text(toks)!r}")
        decls = [first[stars_at:]] + parts[1:]
        for d in decls:
            name, stars, array = _declarator(d, t.line)
            fields.append(Field(name, _type_text(base) + "*" * stars, array))
    return tuple(fields)


def _declarator(toks, line):
    stars = 0
    while toks and toks[0].text == "*":
        stars += 1
        toks = toks[1:]
    if toks and toks[0].text == "const":
        raise HeaderError(f"line {line}: const pointers in fields are not supported")
    if not toks or toks[0].kind != "id":
        raise HeaderError(f"line {line}: cannot read the declarator {_type_text(toks)!r}")
    name, rest, array = toks[0].text, toks[1:], None
    if rest:
        if len(rest) == 3 and rest[0].text == "[" and rest[2].text == "]":
            array = _int_value(rest[1].text)
        if array is None:
            raise HeaderError(f"line {line}: cannot read the declarator {_type_text(toks)!r}")
    return name, stars, array


def _function(s, h):
    line = s.expect(API_MACRO).line
    head = []
    while True:
        t = s.next()
        if t.text == "(":
            break
        head.append(t)
    params_toks = s.until(")")
    s.expect(";")
    attrs = []
    while head and head[0].kind == "id" and head[0].text in h.defines and head[0].text not in ANNOTATIONS:
        attrs.append(head.pop(0).text)
    if len(head) < 2 or head[-1].kind != "id":
        raise HeaderError(f"line {line}: cannot read the function declaration {_type_text(head)!r}")
    name = head[-1].text
    returns = _type_text(head[:-1])
    params = []
    parts = _split(params_toks)
    if not (len(parts) == 1 and [x.text for x in parts[0]] in ([], ["void"])):
        for part in parts:
            params.append(_param(name, part, line))
    h.functions.append(Function(name, returns, tuple(params), tuple(attrs), line))
    h.order.append(("function", name))


def _param(func, toks, line):
    annotation = None
    if toks and toks[0].text in ANNOTATIONS:
        annotation = toks[0].text
        toks = toks[1:]
    if any(t.text in ANNOTATIONS for t in toks):
        raise HeaderError(f"line {line}: {func}: an annotation must come first in its parameter")
    if any(t.text in "()[]" for t in toks):
        raise HeaderError(f"line {line}: {func}: cannot read the parameter {_type_text(toks)!r} "
                          "(arrays and function pointers are not supported)")
    if len(toks) < 2 or toks[-1].kind != "id" or toks[-1].text == "const":
        raise HeaderError(f"line {line}: {func}: the parameter {_type_text(toks)!r} has no name")
    return Param(toks[-1].text, _type_text(toks[:-1]), annotation)


def _static_assert(s, h):
    line = s.expect(STATIC_ASSERT_MACRO).line
    s.expect("(")
    args = _split(s.until(")"))
    s.expect(";")
    if len(args) != 2:
        raise HeaderError(f"line {line}: {STATIC_ASSERT_MACRO} takes a condition and a message")
    cond = "".join(t.text for t in args[0])
    found = False
    for m in re.finditer(r"sizeof\((\w+)\)==(\d+)", cond):
        h.size_pins.append(SizePin(m.group(1), int(m.group(2))))
        found = True
    for m in re.finditer(r"offsetof\((\w+),(\w+)\)==(\d+)", cond):
        h.offset_pins.append(OffsetPin(m.group(1), m.group(2), int(m.group(3))))
        found = True
    if not found:
        raise HeaderError(f"line {line}: a static assertion that pins no size or offset")


def _check_types(h):
    """Every type a declaration uses must be a builtin or declared earlier by the header."""
    def check(ctype, where):
        b = base_type(ctype)
        if not h.known_type(b):
            raise HeaderError(f"{where}: unknown type {b!r}")

    for f in h.functions:
        check(f.returns, f"{f.name}'s result")
        for p in f.params:
            check(p.type, f"{f.name}'s parameter {p.name}")
    def check_fields(st, where):
        for fd in st.fields:
            if fd.aggregate is not None:
                check_fields(fd.aggregate, f"{where}.{fd.name}")
            else:
                check(fd.type, f"{where}.{fd.name}")

    for st in h.structs.values():
        check_fields(st, st.name)
    for name, t in h.typedefs.items():
        check(t, f"typedef {name}")

"""Python source: the decoded text and one ``ast`` per member.

Decoding follows the interpreter (PEP 263 coding declarations, a UTF-8 BOM);
the tree is parsed once with ``ast.parse`` and shared by every extractor.  A
syntax error is not an exception here: :class:`PythonModule` carries it in
``error`` (CU006 from the engine's format check) with an empty tree, so every
extractor sees the same thing for a broken file.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from typing import Callable, Mapping

from cuaudit.compat import parse_tree
from cuaudit.formats import FormatError
from cuaudit.model import InputError

#: Larger sources are not parsed (nothing real comes close; a generated 16 MB
#: module would cost seconds and hundreds of MB of AST).
MAX_SOURCE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, eq=False)
class PythonModule:
    """One Python source member, decoded and parsed."""

    path: str
    text: str
    tree: ast.Module
    error: FormatError | None = None
    #: the source's lines (as Python's tokenizer sees them: ``\\f`` does not end a line)
    lines: tuple[str, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    def column(self, line: int, byte_offset: int) -> int:
        """The 1-based character column of an ``ast`` position (a 0-based UTF-8 byte offset)."""
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            if byte_offset <= len(text) and text.isascii():
                return byte_offset + 1  # a byte is a character (most lines of most modules)
            return len(text.encode("utf-8")[:byte_offset].decode("utf-8", "replace")) + 1
        return byte_offset + 1

    def segment(self, node: ast.AST) -> str | None:
        """``ast.get_source_segment(text, node)`` over the shared ``lines`` (line ends written
        as ``\\n``): that function splits the whole text again on every call."""
        line, end_line = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if line is None or end_line is None or col is None or end_col is None:
            return None
        lines = self.lines
        if end_line == line:
            return lines[line - 1].encode()[col:end_col].decode()
        first = lines[line - 1].encode()[col:].decode()
        last = lines[end_line - 1].encode()[:end_col].decode()
        return "\n".join([first, *lines[line:end_line - 1], last])

    def offset(self, line: int, column: int) -> int:
        """The index in ``text`` of a 1-based line and 0-based character column (libcst's positions)."""
        return line_starts(self.text)[line - 1] + column


def decode_source(data: bytes, path: str) -> str:
    """The text of a Python source as the interpreter decodes it; InputError CU006 if it cannot."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        raise InputError("CU006", f"{path}: not valid text ({exc})") from None


def source_lines(text: str) -> tuple[str, ...]:
    """Lines split where Python's tokenizer splits them (``\\n``, ``\\r\\n``, ``\\r`` only).

    ``str.splitlines`` also breaks on form feeds, vertical tabs and other
    separators that Python keeps inside a line (a comment with ``\\x0c`` in
    it): positions computed from those lines would point at the wrong place.
    """
    if not text:
        return ()
    # universal newlines only where there is a carriage return to translate (a copy of the text)
    lines = (io.StringIO(text, newline=None).read() if "\r" in text else text).split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ends with a newline: no line after it
    return tuple(lines)


def line_starts(text: str) -> list[int]:
    """Where each line of ``text`` starts, lines ending where ``source_lines`` ends them."""
    return [0] + [m.end() for m in _LINE_END.finditer(text)]


_LINE_END = re.compile(r"\r\n|\r|\n")


def decode_python(data: bytes, path: str) -> str:
    """The text ``parse_python`` parses: InputError CU004 for a source too large, CU006 for one that is not text."""
    if len(data) > MAX_SOURCE_BYTES:
        raise InputError("CU004", f"{path}: larger than {MAX_SOURCE_BYTES} bytes, not read as Python source")
    return decode_source(data, path)


def parse_python(data: bytes, path: str) -> PythonModule:
    """Decode and parse; raises InputError for what is not Python text at all."""
    return parse_python_text(decode_python(data, path), path)


def parse_python_text(text: str, path: str = "<source>") -> PythonModule:
    """Parse source that is already text (what ``parse_python`` does after decoding)."""
    lines = source_lines(text)
    try:
        tree = parse_tree(text, path)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:  # ValueError: NUL bytes
        line = getattr(exc, "lineno", None) or None
        col = getattr(exc, "offset", None) or None
        msg = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        where = f" (line {line})" if line else ""
        return PythonModule(path, text, ast.Module(body=[], type_ignores=[]),
                            FormatError("CU006", f"{path}: not valid Python: {msg}{where}", line, col), lines)
    return PythonModule(path, text, tree, None, lines)


def compiles(text: str, path: str = "<source>") -> bool:
    """Whether ``ast.parse`` takes ``text``, where that is known without building its tree.

    True is final: :func:`parse_python_text` would find no error.  False says nothing: parse it to
    learn why (or that it parses after all).  It runs the interpreter's ``symtable`` (the same
    tokenizer and parser into the C arena, then one object per scope instead of one per node of
    the tree, about 40 % less time than ``ast.parse``), on the versions where its verdict can be
    made exact (``_EXACT_WITHOUT_TREE``: 3.10 and 3.11; elsewhere always False).

    Exact, because the two differ only in the depth they go to.  ``ast`` builds a Python object for
    nodes the compiler's walk passes through without a level of its own (a keyword argument, a
    comprehension, an ``except`` clause, the arguments of a ``lambda``): a tree can be deeper for
    ``ast`` than for ``symtable``, by up to about 750 levels where the parser stops (a chain of
    ``lambda a=`` defaults) plus 200 brackets and 100 indentations.  ``ast.parse`` refuses a tree
    about 2,990 levels deep.  On 3.10 and 3.11 the walk's bound follows the recursion limit, so
    here it runs with that limit ``_WALK_MARGIN`` frames above the current depth: about 900
    levels, far below what either refuses.  A deeper source is False, and parsed.
    ``tests/test_on_demand_facts.py`` compares the verdict with ``ast.parse`` on every nesting
    construct at and past both bounds (the figures are in benchmarks/RESULTS.md, fourteenth session).
    """
    if not _EXACT_WITHOUT_TREE or "\0" in text:
        return False
    import _symtable

    old = sys.getrecursionlimit()
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    # ast.parse's bound follows the same limit (about three levels a frame): the walk's stays
    # _AST_LEAD frames below it, whatever limit the process runs with (a library user may lower it)
    limit = min(depth + _WALK_MARGIN, old - _AST_LEAD)
    if limit <= depth + 10:
        return False
    try:
        # the limit is the interpreter's: another thread may run under it for a few bytecodes until the
        # C call takes the GIL for its whole length (the worker pool's threads are far shallower)
        sys.setrecursionlimit(limit)
        _symtable.symtable(text, path, "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return False
    finally:
        sys.setrecursionlimit(old)
    return True


#: where the compiler's walk of a parse (``symtable``) is bounded by the recursion limit: 3.12 and
#: later bound it by a fixed count instead, one or two levels past ``ast``'s for the same tree
_EXACT_WITHOUT_TREE = sys.version_info < (3, 12)
#: frames of recursion limit given to that walk: it goes about three levels of the tree per frame
_WALK_MARGIN = 300
#: frames by which that walk's limit stays below the one ``ast.parse`` meets: 1,100 levels (the most
#: ``ast`` goes deeper than ``symtable`` on one tree, with room) and the few frames between the calls
_AST_LEAD = 380


# -- walking the tree: ast.walk / ast.iter_child_nodes without their per-node generators ---------
#
# The passes visit every node of every module (the stdlib's too): ``ast.iter_child_nodes``
# cost half of a cold check of cupy 14.2.0's sources.  These give the same nodes in the
# same order, except the operator and context singletons (``Load``, ``Add``, ``Eq`` ...),
# which have no children and are never what a pass looks for (it reads ``node.ctx`` /
# ``node.op`` directly).

_NO_CHILDREN_FIELDS = frozenset({
    "ctx", "op", "ops", "type_ignores",
    # identifiers and plain values, never nodes
    "id", "attr", "arg", "name", "module", "asname", "level", "conversion", "simple", "is_async", "kind",
    "type_comment",
})
#: list fields that may hold something other than nodes (None for a `**x` key or a keyword-only
#: argument without default, identifiers for `global`/`nonlocal` and class patterns)
_MIXED_LISTS = frozenset({"keys", "kw_defaults", "names", "kwd_attrs"})
#: the one set of nodes no pass enters: visited themselves, their children never (a name's only
#: child is its context; the rest have none).  Names and constants are most of a tree's nodes.
LEAVES = frozenset({ast.Name, ast.Constant, ast.alias, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal})

Fields = tuple[tuple[str, bool], ...]


class _FieldTable(dict):  # type: ignore[type-arg]
    """type -> its fields that may hold child nodes, each with whether it is a list that may hold
    something else too; filled on first use.  A plain subscript per node (a call per node was a
    tenth of a walk)."""

    def __init__(self, backward: bool) -> None:
        super().__init__()
        self.backward = backward

    def __missing__(self, t: type) -> Fields:
        fields = tuple((f, f in _MIXED_LISTS) for f in t._fields if f not in _NO_CHILDREN_FIELDS)
        self[t] = fields[::-1] if self.backward else fields
        return self[t]


#: the walks' one way to find children, in field order ...
CHILD_FIELDS: Mapping[type, Fields] = _FieldTable(backward=False)
#: ... and last first, what a stack walk pushes to read them in order
BACKWARD_FIELDS: Mapping[type, Fields] = _FieldTable(backward=True)
_BACKWARD_ONLY: dict[tuple[type, tuple[str, ...]], Fields] = {}


def _backward_only(t: type, only: tuple[str, ...]) -> Fields:
    fields = _BACKWARD_ONLY.get((t, only))
    if fields is None:
        fields = _BACKWARD_ONLY[(t, only)] = tuple((f, f in _MIXED_LISTS) for f in reversed(only))
    return fields


#: ASDL types of fields that never hold nodes
_NOT_NODES = frozenset({"identifier", "string", "int", "constant"})


class _PusherTable(dict):  # type: ignore[type-arg]
    """type -> a function that puts a node's children on a walk's stack, last first (what
    ``BACKWARD_FIELDS`` says, leaves included): generated once per type from the node class's
    ASDL signature (``Call(expr func, expr* args, keyword* keywords)``), so that a walk makes one
    call per node instead of a loop over its fields with a ``getattr`` and a test each (a third
    of a walk's time).

    ``fields``: the fields pushed, in the order pushed (``CHILD_FIELDS``, first to last, for a
    walk that reads the last field first: ``PUSH_FIELDS``); a field's own nodes go last first."""

    def __init__(self, fields: Mapping[type, Fields]) -> None:
        super().__init__()
        self.fields = fields

    def __missing__(self, t: type) -> Pusher:
        kinds = _asdl_kinds(t)
        lines = ["def push_children(node, extend, push):"]
        for name, mixed in self.fields[t]:
            kind = kinds.get(name) if kinds is not None else None
            if kind is None:  # not a class of the ast module's own: every field, as a walk reads it
                lines.append(f"    _generic(node, {name!r}, {mixed}, extend, push)")
            elif kind.rstrip("*?") in _NOT_NODES:
                continue
            elif kind.endswith("*"):
                lines.append(f"    extend([v for v in reversed(node.{name}) if isinstance(v, AST)])" if mixed
                             else f"    extend(node.{name}[::-1])")
            else:
                lines.append(f"    v = node.{name}\n    if v is not None:\n        push(v)")
        lines.append("    return None")
        namespace: dict[str, object] = {"AST": ast.AST, "_generic": _push_field}
        exec("\n".join(lines), namespace)  # noqa: S102
        self[t] = namespace["push_children"]
        return self[t]


def _asdl_kinds(t: type) -> dict[str, str] | None:
    """A node class's fields and their ASDL types, from its docstring; None when it has none."""
    match = re.fullmatch(rf"{t.__name__}\((.*)\)", (t.__doc__ or "").strip(), re.DOTALL)
    if match is None:
        return None
    parts = [p.rsplit(" ", 1) for p in match.group(1).split(", ")] if match.group(1) else []
    if any(len(p) != 2 for p in parts) or [p[1] for p in parts] != list(getattr(t, "_fields", ())):
        return None
    return {name: kind for kind, name in parts}


def _push_field(node: ast.AST, name: str, mixed: bool, extend: Callable[[list[ast.AST]], None],
                push: Callable[[ast.AST], None]) -> None:
    value = getattr(node, name, None)
    if type(value) is list:
        extend([v for v in reversed(value) if isinstance(v, ast.AST)])
    elif value is not None and isinstance(value, ast.AST):
        push(value)


Pusher = Callable[[ast.AST, Callable[[list[ast.AST]], None], Callable[[ast.AST], None]], None]
#: type -> the function that pushes a node's children, last first: the walks' one way down
PUSH_CHILDREN: Mapping[type, Pusher] = _PusherTable(BACKWARD_FIELDS)
#: type -> the function that pushes a node's fields in field order, each field's nodes last first:
#: a stack walk then reads the last field first (an ``else`` before its ``if`` body), the order
#: promotion's scopes were always built in
PUSH_FIELDS: Mapping[type, Pusher] = _PusherTable(CHILD_FIELDS)


def preorder(roots: list[ast.AST] | list[ast.stmt], keep: frozenset[type],
             enter: Mapping[type, tuple[str, ...]] | None = None) -> list[ast.AST]:
    """The nodes of the types ``keep`` in and under ``roots``, in source order (depth first,
    children in ``ast.iter_child_nodes`` order): the one walk the passes share.

    ``enter`` names, for some node types, the only fields walked into (``()``: the node is kept
    if asked for but not entered): a function body's own nodes leave nested classes and lambdas
    out.  ``LEAVES`` are never entered.  An explicit stack and a generated function per type
    (``PUSH_CHILDREN``): no generator, no loop over fields per node (the passes visit every node
    of an environment).
    """
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(roots)[::-1]
    pop, push, extend, add = stack.pop, stack.append, stack.extend, out.append
    leaves, pushers = LEAVES, PUSH_CHILDREN
    enter = enter or {}
    while stack:
        n = pop()
        t = type(n)
        if t in keep:
            add(n)
        if t in leaves:
            continue
        if t in enter:
            for name, mixed in _backward_only(t, enter[t]):
                _push_field(n, name, mixed, extend, push)
            continue
        pushers[t](n, extend, push)
    return out


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """The child nodes of ``node`` in ``ast.iter_child_nodes`` order (operator/context nodes left out)."""
    out: list[ast.AST] = []
    for name, mixed in CHILD_FIELDS[type(node)]:
        value = getattr(node, name, None)
        if type(value) is list:
            out += [v for v in value if isinstance(v, ast.AST)] if mixed else value
        elif value is not None and isinstance(value, ast.AST):
            out.append(value)
    return out


def walk(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node below it, in ``ast.walk`` order (operator/context nodes left out)."""
    out = [node]
    i = 0
    while i < len(out):
        n = out[i]
        i += 1
        if type(n) not in LEAVES:
            out += child_nodes(n)
    return out

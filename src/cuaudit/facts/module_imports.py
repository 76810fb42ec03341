"""What a Python module imports when it is imported: its module-level import statements.

Only statements that run at import time count: the module body and the
bodies of ``if``/``try``/``with`` blocks in it, not functions or classes (a
lazy import inside a function is the cure for eager loading, not a load).
Nothing is executed; the source is parsed with :mod:`ast`.

Speed: a GPU package has hundreds of modules (cupy-cuda12x 14.2.0: 339, 4 MB)
and parsing them all costs more than reading its 65 ELF files' dynamic
sections.  So a line scan finds the import statements (outside triple-quoted strings)
and, for an indented one, walks up to the headers of its enclosing blocks
(``def``/``class`` → lazy, ``try`` with a handler that swallows
``ImportError`` → guarded).  A file with no import line is not parsed; a
file where the scan meets anything unusual is parsed whole with :mod:`ast`,
which stays the reference (tests compare both on real packages).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from cuaudit.facts import Extractor, InputError, MemberReader
from cuaudit.model import Member, MemberKind


@dataclass(frozen=True)
class ImportStmt:
    module: str  # as written ('' for `from . import x`)
    level: int  # leading dots
    names: tuple[str, ...]  # for `from M import a, b`; () for `import M`
    line: int
    guarded: bool  # inside a try whose handler swallows ImportError: a failure does not fail the import


@dataclass(frozen=True)
class ModuleImports:
    imports: tuple[ImportStmt, ...]


class ModuleImportsExtractor(Extractor):
    name = "module_imports"
    version = 1

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.PYTHON and member.path.endswith(".py")

    def extract(self, reader: MemberReader) -> ModuleImports:
        text = reader.text()
        hits = _import_hits(text)
        if not hits:
            return ModuleImports(())
        fast = _scan_imports(text, hits)
        if fast is not None:
            return ModuleImports(fast)
        try:
            tree = ast.parse(text, filename=reader.path)
        except SyntaxError as exc:
            raise InputError("CU006", f"{reader.path}: not valid Python ({exc.msg}, line {exc.lineno})") from None
        out: list[ImportStmt] = []

        def visit(body: list[ast.stmt], guarded: bool) -> None:
            for node in body:
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        out.append(ImportStmt(alias.name, 0, (), node.lineno, guarded))
                elif isinstance(node, ast.ImportFrom):
                    names = tuple(a.name for a in node.names)
                    out.append(ImportStmt(node.module or "", node.level, names, node.lineno, guarded))
                elif isinstance(node, ast.If):
                    if _is_type_checking(node.test):
                        visit(node.orelse, guarded)
                        continue
                    visit(node.body, guarded)
                    visit(node.orelse, guarded)
                elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                    visit(node.body, guarded or _swallows_import_error(node))
                    for h in node.handlers:
                        visit(h.body, True)
                    visit(node.orelse, guarded)
                    visit(node.finalbody, guarded)
                elif isinstance(node, (ast.With, ast.AsyncWith)):
                    visit(node.body, guarded)

        visit(tree.body, False)
        return ModuleImports(tuple(out))


_IMPORT_STMT = r"([ \t]*)(?:from[ \t]+\.*[\w.]*[ \t]+import\b|import[ \t]+\w)"
_IMPORT_FIRST = re.compile(_IMPORT_STMT)
_IMPORT_LINE = re.compile("\n" + _IMPORT_STMT)
_TYPE_CHECKING_IF = re.compile(r"if[ \t]+[\w.]*TYPE_CHECKING[ \t]*:")
_NAME = r"[A-Za-z_][\w]*(?:[ \t]+as[ \t]+[A-Za-z_]\w*)?"
_DOTTED = r"[A-Za-z_][\w.]*(?:[ \t]+as[ \t]+[A-Za-z_]\w*)?"
# One-line statements without comments or parentheses; anything else is parsed with ast.
_SIMPLE_FROM = re.compile(rf"from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+({_NAME}(?:[ \t]*,[ \t]*{_NAME})*|\*)[ \t]*(?:#.*)?$")
_SIMPLE_IMPORT = re.compile(rf"import[ \t]+({_DOTTED}(?:[ \t]*,[ \t]*{_DOTTED})*)[ \t]*(?:#.*)?$")
_TRIPLE = re.compile(r"(?s)(\"\"\"|\'\'\').*?\1")


_HEADER = re.compile(r"(async[ \t]+)?(def|class|if|elif|else|try|except|finally|with|for|while|match|case)\b")


def _import_hits(text: str) -> list[tuple[int, int]]:
    """(start, indentation) of every line that begins an import statement.

    The pattern starts with a literal newline so that the regex engine can skip
    ahead with a fast search instead of trying every position (37 MB of torch
    sources: 1.3 s with ``^``/MULTILINE, a tenth of that this way).
    """
    out = [(0, len(m.group(1)))] if (m := _IMPORT_FIRST.match(text)) else []
    out += [(m.start() + 1, len(m.group(1))) for m in _IMPORT_LINE.finditer(text)]
    return out


def _scan_imports(text: str, hits: list[tuple[int, int]]) -> tuple[ImportStmt, ...] | None:
    """The import statements that run at import time, by a line scan; None when unsure.

    For each import line, the enclosing block headers are found by walking up to
    lines of smaller indentation: a ``def``/``class`` (or loop) means lazy, a ``try``
    whose handler swallows ImportError means guarded.  Triple-quoted strings are
    skipped.  Anything unusual (a continuation line where a header should be)
    gives up, and the caller parses the file with :mod:`ast`.
    """
    import bisect

    spans = [(m.start(), m.end()) for m in _TRIPLE.finditer(text)] if ('"""' in text or "\'\'\'" in text) else []
    span_starts = [a for a, _ in spans]

    def in_string(pos: int) -> bool:
        k = bisect.bisect_right(span_starts, pos) - 1
        return k >= 0 and spans[k][0] < pos < spans[k][1]

    def line_before(start: int) -> int:
        """Start of the line before the one starting at ``start`` (-1 at the top)."""
        if start <= 0:
            return -1
        return text.rfind("\n", 0, start - 1) + 1

    def line_at(start: int) -> str:
        end = text.find("\n", start)
        return text[start : end if end >= 0 else len(text)]

    out: list[ImportStmt] = []
    lineno, counted = 1, 0
    for start, indent in hits:
        if in_string(start):
            continue
        lineno += text.count("\n", counted, start)
        counted = start
        cur = indent
        guarded = lazy = False
        pos = start
        while cur > 0:
            pos = line_before(pos)
            if pos < 0:
                return None
            line = line_at(pos)
            st = line.strip()
            if not st or st[0] == "#" or in_string(pos):
                continue
            ind = len(line) - len(line.lstrip(" \t"))
            if ind >= cur:
                continue
            if st[0] in ")]}":
                # the end of a header written over several lines (black's `) -> None:`):
                # the header itself is the next line up at this indentation
                while True:
                    pos = line_before(pos)
                    if pos < 0:
                        return None
                    line = line_at(pos)
                    if line.strip() and len(line) - len(line.lstrip(" \t")) == ind and not in_string(pos):
                        break
                st = line.strip()
                h = _HEADER.match(st)
                if h is None:
                    return None
            else:
                h = _HEADER.match(st)
                if h is None or not st.split("#", 1)[0].rstrip().endswith(":"):
                    return None
            kw = h.group(2)
            if kw in ("def", "class", "for", "while", "match", "case") or h.group(1):
                lazy = True
                break
            if kw == "if" and _TYPE_CHECKING_IF.match(st):
                lazy = True
                break
            if kw == "except":
                guarded = True
            elif kw == "try" and not guarded:
                guarded = _try_swallows(text, pos, ind)
            cur = ind
        if lazy:
            continue
        stmt = _statement(text, start)
        if stmt is None:
            return None
        parsed = _parse_statement(stmt, lineno, guarded)
        if parsed is None:
            return None
        out += parsed
    return tuple(out)


def _try_swallows(text: str, pos: int, ind: int) -> bool:
    """Whether one of the handlers of the ``try:`` at ``pos`` catches ImportError without re-raising."""
    n = len(text)

    def next_line(p: int) -> int:
        e = text.find("\n", p)
        return n if e < 0 else e + 1

    j = next_line(pos)
    while j < n:
        e = text.find("\n", j)
        line = text[j : e if e >= 0 else n]
        st = line.strip()
        li = len(line) - len(line.lstrip(" \t"))
        if not st or st[0] == "#" or li > ind:
            j = next_line(j)
            continue
        if li < ind or not st.startswith(("except", "else", "finally")):
            return False
        if st.startswith("except"):
            clause = st[len("except"):].split(":", 1)[0]
            names = set(re.findall(r"\w+", clause))
            bare = not names
            k = next_line(j)
            raises = False
            while k < n:
                e = text.find("\n", k)
                body = text[k : e if e >= 0 else n]
                bs = body.strip()
                if bs and bs[0] != "#" and len(body) - len(body.lstrip(" \t")) <= ind:
                    break
                if bs.startswith("raise"):
                    raises = True
                k = next_line(k)
            if (bare or names & _CATCHING) and not raises:
                return True
            j = k
            continue
        j = next_line(j)
    return False


def _statement(text: str, start: int) -> str | None:
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    line = text[start:end]
    if "(" in line and ")" not in line:
        close = text.find(")", start)
        if close < 0:
            return None
        end = close + 1
    while text[start:end].rstrip().endswith("\\"):
        nxt = text.find("\n", end + 1)
        end = len(text) if nxt < 0 else nxt
    return text[start:end].strip()


def _parse_statement(stmt: str, lineno: int, guarded: bool) -> list[ImportStmt] | None:
    simple = _SIMPLE_FROM.match(stmt)
    if simple is not None:
        dots, module, names = simple.group(1), simple.group(2), simple.group(3)
        return [ImportStmt(module, len(dots), tuple(x.split()[0] for x in names.split(",")), lineno, guarded)]
    simple = _SIMPLE_IMPORT.match(stmt)
    if simple is not None:
        return [ImportStmt(x.split()[0], 0, (), lineno, guarded) for x in simple.group(1).split(",")]
    try:
        node = ast.parse(stmt).body[0]
    except (SyntaxError, IndexError):
        return None
    if isinstance(node, ast.Import):
        return [ImportStmt(a.name, 0, (), lineno, guarded) for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [ImportStmt(node.module or "", node.level, tuple(a.name for a in node.names), lineno, guarded)]
    return None


_CATCHING = {"ImportError", "ModuleNotFoundError", "OSError", "Exception", "BaseException"}


def _swallows_import_error(node: ast.stmt) -> bool:
    """A handler catches ImportError and does not re-raise (cupy/__init__.py re-raises: not guarded)."""
    for h in node.handlers:  # type: ignore[attr-defined]
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        names = {getattr(t, "id", getattr(t, "attr", None)) for t in types if t is not None}
        if h.type is not None and not names & _CATCHING:
            continue
        if not any(isinstance(n, ast.Raise) for n in ast.walk(ast.Module(body=h.body, type_ignores=[]))):
            return True
    return False


def _is_type_checking(test: ast.expr) -> bool:
    # `TYPE_CHECKING`, `typing.TYPE_CHECKING`, and aliases such as torch's `_TYPE_CHECKING`
    return (isinstance(test, ast.Name) and test.id.endswith("TYPE_CHECKING")) or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )

"""What a Python module imports when it is imported: its module-level import statements.

Only statements that run at import time count: the module body and the
bodies of ``if``/``try``/``with`` blocks in it, not functions or classes (a
lazy import inside a function is the cure for eager loading, not a load).
Nothing is executed; the source is parsed with :mod:`ast`.

Speed: a GPU package has hundreds of modules (cupy-cuda12x 14.2.0: 339, 4 MB)
and parsing them all costs more than reading its 65 ELF files' dynamic
sections.  So a line scan finds the import statements first: a file with
none is not parsed; a file whose imports all start at column 0 (outside
triple-quoted strings) has exactly those statements parsed, one by one; only
files with indented imports (inside ``try``/``if``/functions) are parsed
whole, since only the tree tells a guarded or lazy import from an eager one.
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
        hits = list(_IMPORT_LINE.finditer(text))
        if not hits:
            return ModuleImports(())
        if not any(m.group(1) for m in hits):
            fast = _column0_imports(text, hits)
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


_IMPORT_LINE = re.compile(r"^([ \t]*)(?:from[ \t]+\.*[\w.]*[ \t]+import\b|import[ \t]+\w)", re.M)
_TRIPLE = re.compile(r"(?s)(\"\"\"|\'\'\').*?\1")


def _column0_imports(text: str, hits: list[re.Match]) -> tuple[ImportStmt, ...] | None:
    """The column-0 import statements, parsed one by one; None when unsure (then parse the file)."""
    strings = [(m.start(), m.end()) for m in _TRIPLE.finditer(text)] if ('"""' in text or "\'\'\'" in text) else []
    out: list[ImportStmt] = []
    for m in hits:
        start = m.start()
        if any(a < start < b for a, b in strings):
            continue  # an example inside a docstring
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
        try:
            node = ast.parse(text[start:end]).body[0]
        except (SyntaxError, IndexError):
            return None
        lineno = text.count("\n", 0, start) + 1
        if isinstance(node, ast.Import):
            out += [ImportStmt(a.name, 0, (), lineno, False) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(ImportStmt(node.module or "", node.level, tuple(a.name for a in node.names), lineno, False))
        else:
            return None
    return tuple(out)


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
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )

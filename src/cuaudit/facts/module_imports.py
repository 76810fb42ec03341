"""What a Python module imports when it is imported: its module-level import statements.

Only statements that run at import time count: the module body and the
bodies of ``if``/``try``/``with`` blocks in it, not functions or classes (a
lazy import inside a function is the cure for eager loading, not a load).
Nothing is executed: this is a walk of the module-level statements of the
member's one parse (``MemberReader.python()``).  A module that does not parse
imports nothing here, as for every other extractor (the format check reports
it).

(This extractor used to find import lines with a text scan to avoid a parse;
the parse is now shared with the other Python extractors and the format check,
and walking the module level of a tree costs less than the scan did.)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cuaudit.facts import CompactState, Extractor, MemberReader, compact
from cuaudit.formats.python import PythonModule
from cuaudit.model import Member, MemberKind


@compact
@dataclass(frozen=True)
class ImportStmt(CompactState):
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
    on_demand = True
    extracted_along = True  # module-level statements only: a fraction of a parse
    version = 2  # 2: a walk of the shared parse; a module with a syntax error imports nothing

    def applies(self, member: Member) -> bool:
        return member.kind is MemberKind.PYTHON and member.path.endswith(".py")

    def extract(self, reader: MemberReader) -> ModuleImports:
        return module_imports(reader.python())


def module_imports(module: PythonModule) -> ModuleImports:
    """The import statements of one parsed module that run when it is imported."""
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

    visit(module.tree.body, False)
    return ModuleImports(tuple(out))


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

"""Source rewriting for the tracer: arithmetic and NumPy calls go through hooks.

NumPy's ufuncs are C objects and ``ndarray`` is an immutable C type: neither
``__array_ufunc__`` (only consulted for *other* types) nor monkey-patching
``ndarray.__add__`` can see ``uint8_array + 300``.  What can is the code that
performs it: like pytest's assertion rewriting, the tracer compiles the
user's own modules from a rewritten AST in which

* ``a <op> b`` (``+ - * / // % ** & | ^ << >>``) becomes ``__cu_opN__(a, b, SITE)``,
* ``x <op>= v`` becomes an in-place hook (names, attributes, subscripts),
* calls whose callee's name is a NumPy ufunc or a promotion-sensitive
  function (``np.add(...)``, ``xp.can_cast(...)``) become ``__cu_call__(SITE, f, ...)`` (dunder names: never mangled in class bodies).

* a single comparison (``a < b``; not chains, ``is`` or ``in``) becomes
  ``__cu_cmp__(OP, a, b, SITE)``: its *values* can change (``np.float32(16777217)
  == 16777217`` is False under value-based casting, which compares in float64,
  and True under NEP 50, which casts the Python int to float32),
* a call through an attribute with an integer literal argument
  (``np.full(3, 300, dtype=np.uint8)``, ``a.fill(-1)``) goes through
  ``__cu_call__`` too: NumPy 2 raises OverflowError where 1.x wrapped around.

Only the user's modules are rewritten
(never the standard library or site-packages), so the library's own
arithmetic runs at full speed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Python operator -> (index into runtime tables, symbol)
BINOPS: dict[type, tuple[int, str]] = {
    ast.Add: (0, "+"),
    ast.Sub: (1, "-"),
    ast.Mult: (2, "*"),
    ast.Div: (3, "/"),
    ast.FloorDiv: (4, "//"),
    ast.Mod: (5, "%"),
    ast.Pow: (6, "**"),
    ast.BitAnd: (7, "&"),
    ast.BitOr: (8, "|"),
    ast.BitXor: (9, "^"),
    ast.LShift: (10, "<<"),
    ast.RShift: (11, ">>"),
}

#: callee names worth a runtime look: NumPy's binary ufuncs plus the functions whose
#: answer depends on Python-scalar promotion.  The runtime checks the real object.
SENSITIVE_CALLS = frozenset(
    """add subtract multiply divide true_divide floor_divide remainder mod fmod power float_power
    maximum minimum fmax fmin bitwise_and bitwise_or bitwise_xor left_shift right_shift
    arctan2 hypot copysign nextafter logaddexp logaddexp2 heaviside gcd lcm ldexp
    logical_and logical_or logical_xor can_cast result_type""".split()
)


#: comparison operator -> (index into runtime tables, symbol)
COMPARES: dict[type, tuple[int, str]] = {
    ast.Eq: (0, "=="), ast.NotEq: (1, "!="), ast.Lt: (2, "<"), ast.LtE: (3, "<="), ast.Gt: (4, ">"), ast.GtE: (5, ">="),
}


def _int_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


@dataclass(frozen=True)
class Site:
    """One rewritten source location."""

    filename: str
    line: int
    column: int  # 1-based, in characters
    end_line: int
    end_column: int
    operation: str  # "+", "+=", "call"
    source: str


class _Rewriter(ast.NodeTransformer):
    def __init__(self, filename: str, source: str, sites: list[Site]) -> None:
        self.filename = filename
        self.source = source
        self.lines = source.splitlines()
        self.sites = sites

    def _site(self, node: ast.AST, operation: str) -> ast.Constant:
        line = node.lineno  # type: ignore[attr-defined]
        end_line = getattr(node, "end_lineno", line) or line
        col = self._char_col(line, node.col_offset)  # type: ignore[attr-defined]
        end_col = self._char_col(end_line, getattr(node, "end_col_offset", 0) or 0)
        segment = ast.get_source_segment(self.source, node) or ""
        segment = " ".join(segment.split())
        if len(segment) > 120:
            segment = segment[:117] + "..."
        self.sites.append(Site(self.filename, line, col + 1, end_line, end_col + 1, operation, segment))
        return ast.Constant(len(self.sites) - 1)

    def _char_col(self, line: int, byte_col: int) -> int:
        if 0 < line <= len(self.lines):
            return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return byte_col

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        op = BINOPS.get(type(node.op))
        if op is None:
            return node
        site = self._site(node, op[1])
        call = ast.Call(ast.Name(f"__cu_op{op[0]}__", ast.Load()), [node.left, node.right, site], [])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        op = BINOPS.get(type(node.op))
        if op is None:
            return node
        target = node.target
        site = self._site(node, op[1] + "=")
        if isinstance(target, ast.Name):
            load = ast.Name(target.id, ast.Load())
            value = ast.Call(ast.Name("__cu_iop__", ast.Load()), [ast.Constant(op[0]), load, node.value, site], [])
            return ast.copy_location(ast.Assign([ast.Name(target.id, ast.Store())], value), node)
        if isinstance(target, ast.Attribute):
            call = ast.Call(
                ast.Name("__cu_iattr__", ast.Load()),
                [ast.Constant(op[0]), target.value, ast.Constant(target.attr), node.value, site],
                [],
            )
            return ast.copy_location(ast.Expr(call), node)
        if isinstance(target, ast.Subscript):
            call = ast.Call(
                ast.Name("__cu_iitem__", ast.Load()),
                [ast.Constant(op[0]), target.value, _as_expression(target.slice), node.value, site],
                [],
            )
            return ast.copy_location(ast.Expr(call), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        op = COMPARES.get(type(node.ops[0])) if len(node.ops) == 1 else None
        if op is None:
            return node
        site = self._site(node, op[1])
        call = ast.Call(ast.Name("__cu_cmp__", ast.Load()), [ast.Constant(op[0]), node.left, node.comparators[0], site], [])
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        literal_int = isinstance(func, ast.Attribute) and any(
            _int_literal(a) for a in [*node.args, *(k.value for k in node.keywords)])
        if name not in SENSITIVE_CALLS and not literal_int:
            return node
        site = self._site(node, "call")
        call = ast.Call(ast.Name("__cu_call__", ast.Load()), [site, func, *node.args], node.keywords)
        return ast.copy_location(call, node)


def _as_expression(node: ast.expr) -> ast.expr:
    """A subscript's slice as an ordinary expression (``1:3`` -> ``slice(1, 3, None)``)."""
    if isinstance(node, ast.Slice):
        parts = [p if p is not None else ast.Constant(None) for p in (node.lower, node.upper, node.step)]
        return ast.copy_location(ast.Call(ast.Name("slice", ast.Load()), [_as_expression(p) for p in parts], []), node)
    if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts):
        return ast.copy_location(ast.Tuple([_as_expression(e) for e in node.elts], ast.Load()), node)
    return node


def rewrite(tree: ast.Module, filename: str, source: str, sites: list[Site]) -> ast.Module:
    """Rewrite a parsed module in place (sites are appended to ``sites``)."""
    tree = ast.fix_missing_locations(_Rewriter(filename, source, sites).visit(tree))
    # Nodes made by another rewriter before this one (pytest's assertion rewriting) may
    # carry a start but no end; fix_missing_locations then gives them an end before
    # their start, which compile() refuses ("AST node line range (18, 1) is not valid").
    for node in ast.walk(tree):
        end = getattr(node, "end_lineno", None)
        if end is not None and end < node.lineno:  # type: ignore[attr-defined]
            node.end_lineno, node.end_col_offset = node.lineno, node.col_offset  # type: ignore[attr-defined]
    return tree


def compile_traced(source: str, filename: str, sites: list[Site]):
    """Compile ``source`` with the hooks in place (a code object for ``exec``)."""
    tree = ast.parse(source, filename)
    return compile(rewrite(tree, filename, source, sites), filename, "exec", dont_inherit=True)

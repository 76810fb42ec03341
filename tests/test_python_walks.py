"""The walks every Python pass shares (formats/python.py) against the ``ast`` module's own.

The passes' facts depend on the order these give (which import of a name counts last, the
order of effects and chains), so each walk is held to the standard library's order on a
source that uses every kind of node with unusual fields (match patterns, ``**`` in dicts,
keyword-only defaults, ``global``, f-strings, ``try``/``except*``).
"""

from __future__ import annotations

import ast
import sys

from cuaudit.formats.python import LEAVES, PUSH_CHILDREN, PUSH_FIELDS, _asdl_kinds, parse_python_text, preorder, walk

SOURCE = '''
import os, sys as system
from . import sibling
GLOBAL = {"a": 1, **other}
def outer(a, /, b=len("x"), *args, c, d=f"{b!r:>{a}}", **kw) -> "T":
    global GLOBAL
    @decorate(call())
    def inner(x=default_call()):
        return [y for y in range(x) if y]
    class Nested(Base, metaclass=Meta):
        attr = in_class()
    f = lambda z=lambda_default(): z + 1
    try:
        import json
    except (ImportError, OSError) as exc:
        pass
    else:
        sys.modules[__name__] = after()
    match point:
        case {"x": 0, **rest}:
            pass
        case Point(x=0, y=yy) | [1, *others] if guard():
            nonlocal_call()
        case None:
            pass
    while cond():
        break
    return not (a < b <= c) and -x
'''
if sys.version_info >= (3, 11):
    SOURCE += '''
try:
    pass
except* ValueError:
    handled()
'''

_SINGLETONS = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


def _reference_preorder(nodes: list[ast.AST]) -> list[ast.AST]:
    out: list[ast.AST] = []
    for node in nodes:
        if isinstance(node, _SINGLETONS):
            continue
        out.append(node)
        if type(node) not in LEAVES:
            out += _reference_preorder(list(ast.iter_child_nodes(node)))
    return out


def test_walk_gives_ast_walks_nodes_in_its_order_without_the_operator_and_context_singletons():
    tree = parse_python_text(SOURCE).tree
    expected = [n for n in ast.walk(tree) if not isinstance(n, _SINGLETONS)]
    assert walk(tree) == expected
    assert len(expected) > 100  # the source exercises the walk


def test_preorder_gives_every_node_in_source_order():
    tree = parse_python_text(SOURCE).tree
    every = frozenset(type(n) for n in ast.walk(tree))
    assert preorder(tree.body, every) == _reference_preorder(tree.body)


def test_preorder_keeps_only_the_asked_types_and_enters_only_the_named_fields():
    tree = parse_python_text(SOURCE).tree
    outer = tree.body[3]
    assert isinstance(outer, ast.FunctionDef)
    # a function body's own calls: a nested def's decorators run, its defaults and body do not;
    # nested classes and lambdas are not entered
    enter = {ast.FunctionDef: ("decorator_list",), ast.ClassDef: (), ast.Lambda: ()}
    calls = preorder(outer.body, frozenset({ast.Call}), enter)
    names = [ast.unparse(c.func) for c in calls]
    assert names == ["decorate", "call", "after", "guard", "nonlocal_call", "cond"]
    assert all(isinstance(c, ast.Call) for c in calls)


def test_the_generated_child_pushers_push_every_child_last_first():
    tree = parse_python_text(SOURCE).tree
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, _SINGLETONS) or type(node) in LEAVES:
            continue
        # generated from the class's ASDL signature, not the slow per-field fallback
        assert _asdl_kinds(type(node)) is not None, type(node)
        stack: list[ast.AST] = []
        PUSH_CHILDREN[type(node)](node, stack.extend, stack.append)
        assert stack[::-1] == [n for n in ast.iter_child_nodes(node) if not isinstance(n, _SINGLETONS)]
        seen.add(type(node))
    assert {ast.Dict, ast.arguments, ast.MatchClass, ast.Try, ast.JoinedStr} <= seen  # lists with None or names in them


def test_the_field_pushers_push_the_fields_first_to_last_and_each_fields_nodes_last_first():
    """PUSH_FIELDS: a stack walk reads a node's last field first, each field's nodes in order (the
    order promotion's scopes are built in: an ``else`` before its ``if`` body)."""
    tree = parse_python_text(SOURCE).tree
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, _SINGLETONS) or type(node) in LEAVES:
            continue
        stack: list[ast.AST] = []
        PUSH_FIELDS[type(node)](node, stack.extend, stack.append)
        expected: list[ast.AST] = []
        for name in reversed(node._fields):
            value = getattr(node, name, None)
            items = value if isinstance(value, list) else [value]
            expected += [v for v in items if isinstance(v, ast.AST) and not isinstance(v, _SINGLETONS)]
        assert stack[::-1] == expected, type(node)
        seen.add(type(node))
    assert {ast.Try, ast.While, ast.Dict, ast.arguments, ast.FunctionDef, ast.MatchClass} <= seen


def test_segment_is_ast_get_source_segment_over_the_shared_lines():
    module = parse_python_text(SOURCE)
    for node in ast.walk(module.tree):
        if hasattr(node, "end_lineno"):
            assert module.segment(node) == ast.get_source_segment(SOURCE, node)
    crlf = "x = call(\r\n    1,\r\n    2)\r\n"
    module = parse_python_text(crlf)
    value = module.tree.body[0].value  # type: ignore[attr-defined]
    assert module.segment(value) == ast.get_source_segment(crlf, value).replace("\r\n", "\n")


def test_nested_function_signatures_are_walked_on_every_python() -> None:
    """A def inside a def has its signature walked for the enclosing function's names: from 3.12
    ``type_params`` is a list on every def (empty without PEP 695 generics), and a list once reached
    the walk as if it were a node, so every nested def of a module failed with CU011 there (found on
    the GPU machine's Python 3.12: 426 modules)."""
    from cuaudit.facts.python_source import parse_python_source

    generic = "[T]" if sys.version_info >= (3, 12) else ""
    facts = parse_python_source(
        "import numpy\n"
        "def outer():\n"
        "    x = numpy.linalg.norm\n"
        f"    def inner{generic}(a=numpy.fft.fft, numpy=None) -> numpy.random.rand:\n"
        "        return numpy.testing.assert_equal\n"
        "    return inner\n")
    assert [(c.root, c.attrs, c.scope, c.shadowed) for c in facts.chains] == [
        ("numpy", ("linalg", "norm"), "outer", False),
        ("numpy", ("testing", "assert_equal"), "outer.inner", True),
    ]
    # the signature's names are the enclosing function's: a name bound there (a walrus in a
    # default) makes that function's own chain of it local, which it is not without the walk
    facts = parse_python_source(
        "import numpy\n"
        "def outer():\n"
        "    x = numpy.linalg.norm\n"
        "    def inner(a=(numpy := None)):\n"
        "        return a\n"
        "    return inner\n")
    assert [(c.root, c.attrs, c.scope, c.shadowed) for c in facts.chains] == [("numpy", ("linalg", "norm"), "outer", True)]

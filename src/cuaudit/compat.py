"""What differs between the Pythons cuaudit supports (3.10 to 3.13)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import ast

__all__ = ["parse_tree", "tomllib"]


def __getattr__(name: str) -> object:
    """``tomllib`` on first use: a check of a wheel without TOML never imports it (every Python
    source's parse comes through this module)."""
    if name == "tomllib":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - 3.10: the same parser, as the tomli package
            import tomli as tomllib
        return tomllib
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_tree(text: str, path: str = "<source>", mode: str = "exec") -> "ast.AST":
    """``ast.parse`` of untrusted text: a tree, or the exception ``ast.parse`` raises.

    Python 3.10 builds the tree's objects without any bound on its depth: a left-recursive chain
    (``a.b.b.b…``, ``1+1+1…``, ``f()()()…``) about 105,000 levels deep, 210 kB of text, overflows
    the C stack and the interpreter dies (SIGSEGV), where 3.11 and later raise RecursionError.  There
    a source that could be that deep (:func:`_may_nest_deeply`) first goes through ``symtable``, whose
    walk of the same parse is bounded (about 3,000 levels): past it, RecursionError, which is also
    what 3.10 raises compiling that source to import it.  Anything else ``symtable`` refuses is left
    to ``ast.parse``.
    """
    import ast

    if _UNBOUNDED_AST and _may_nest_deeply(text):
        import symtable

        try:
            symtable.symtable(text, path, mode)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - a syntax error or a NUL byte: ast.parse says which
            pass
    return ast.parse(text, filename=path, mode=mode, type_comments=False)


#: whether ``ast.parse`` itself may overflow the C stack on a deep tree (before 3.11)
_UNBOUNDED_AST = sys.version_info < (3, 11)
#: the characters each level of an unbounded chain costs at least one of: ``.`` ``(`` ``[`` and
#: the binary operators (brackets nest only 200 deep: the tokenizer's own bound)
_CHAIN_CHARACTERS = ".([+-*/%@&|^<>"
#: chains of this many levels are safe on 3.10's main-thread stack with a margin of five
_SAFE_LINKS = 20_000


def _may_nest_deeply(text: str) -> bool:
    """Whether ``text`` may hold a chain of ``_SAFE_LINKS`` levels: a level costs two characters at
    least, one of them in ``_CHAIN_CHARACTERS`` (counted in C, one pass per character)."""
    if len(text) < 2 * _SAFE_LINKS:
        return False
    return sum(text.count(c) for c in _CHAIN_CHARACTERS) >= _SAFE_LINKS

"""What differs between the Pythons cuaudit supports (3.10 to 3.13)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import ast
    import threading
    from collections.abc import Callable

__all__ = ["deep", "parse_tree", "tomllib"]

_T = TypeVar("_T")


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


def deep(fn: "Callable[[], _T]", again: "Callable[[], _T] | None" = None) -> "_T":
    """``fn()``, for an analysis that recurses once or more per level of a parse tree.

    A tree may be as deep as ``ast.parse`` takes: about 3,000 levels on 3.11 and 3.12, 10,000 on
    3.13, and on 3.10 up to ``_SAFE_LINKS`` (see :func:`parse_tree`), where the default recursion
    limit of 1,000 frames stops a recursive pass after 300 levels or so (``ast.unparse`` of a
    condition, the build scripts' taint walk).  So ``fn`` runs as it is, and only where that
    raises RecursionError (no tree of real code comes near it) runs again from the start in a
    thread of its own with ``_DEEP_FRAMES`` frames and a ``_DEEP_STACK`` stack: Python 3.10 and the
    calls that pass through C on 3.11 take C stack per frame, which the main thread's 8 MB would
    not hold.  ``fn`` must not keep state from the first attempt.  ``again``, when given, is what
    runs in that thread instead: the same analysis without a part that cannot go that deep.  What
    is deeper still raises RecursionError as before.
    """
    try:
        return fn()
    except RecursionError:
        pass
    import threading

    outcome: list[tuple[bool, object]] = []
    done = threading.Event()

    def run() -> None:
        before = sys.getrecursionlimit()
        sys.setrecursionlimit(max(before, _DEEP_FRAMES))
        try:
            outcome.append((True, (again or fn)()))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome.append((False, exc))
        finally:
            sys.setrecursionlimit(before)
            done.set()

    size = threading.stack_size()
    try:
        threading.stack_size(_DEEP_STACK)
        thread = threading.Thread(target=run, name="cuaudit-deep-tree", daemon=True)
        thread.start()
    except (RuntimeError, ValueError, MemoryError):  # no room for such a stack (a ulimit -v): as before
        raise RecursionError("maximum recursion depth exceeded (no thread with a deeper stack)") from None
    finally:
        threading.stack_size(size)
    try:
        # in steps: the signal of the caller's CPU-time budget may reach the other thread; not with
        # join(), which, interrupted by it, takes the thread for stopped (bpo-45274's mending)
        while not done.wait(0.05):
            pass
    except BaseException:  # that budget ended (time_budget): the pass ends with it
        _stop(thread, done)
        raise
    thread.join()
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[return-value]
    raise value  # type: ignore[misc]


#: the frames a recursive pass may take in ``deep``'s thread: four per level of the deepest tree
#: any supported Python parses (``_SAFE_LINKS`` on 3.10), and a margin
_DEEP_FRAMES = 4 * _SAFE_LINKS + 2_000
#: that thread's stack (address space; only the pages a deep pass touches are ever committed):
#: 3.10 takes about 0.5 kB of C stack per Python frame, more through C calls
_DEEP_STACK = 512 << 20


class _Stopped(BaseException):
    """What ``deep``'s thread gets when its caller stopped waiting for it (see :func:`_stop`)."""


def _stop(thread: "threading.Thread", done: "threading.Event", wait: float = 5.0) -> None:
    """Stop the pass in ``thread`` (which sets ``done`` when it ends): it gets ``_Stopped`` at its
    next bytecode; wait for it up to ``wait`` seconds."""
    import ctypes

    if thread.ident is not None and not done.is_set():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Stopped))
        done.wait(wait)

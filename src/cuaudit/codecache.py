"""The methods that ``dataclasses`` writes for each class, compiled once, kept like bytecode.

``@dataclass`` writes the source of ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``... of each class and compiles it when the class is defined.  A check
defines about 100 frozen dataclasses: 620 compilations, a third of the instructions of
checking a small wheel (fastrlock, Python 3.11).  What ``exec`` runs depends only on that
text, so the compiled code is kept, keyed by the text, beside the package's own bytecode
(``__pycache__``, written under the same rule: not with ``PYTHONDONTWRITEBYTECODE``) and a
class whose text is new is compiled as before.  Only the command line installs it.
"""

import atexit
import marshal
import os
import sys

#: the file, beside the package's .pyc files; its bytecode is this interpreter's
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__",
                    f"dataclass-methods.{sys.implementation.cache_tag}.marshal")
#: past this many texts, a save keeps only those of this process (classes that changed leave theirs)
MAX_ENTRIES = 4096

_codes: dict = {}
_used: set = set()
_new = False
_installed_by = None


def _magic() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER


def _exec(source, globals=None, locals=None):  # noqa: A002 - the signature of exec
    """``exec`` for ``dataclasses``: a text's code from the cache, or compiled as exec would."""
    global _new
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None:
            # dont_inherit: exec of a string in dataclasses inherits that module's future flags (none)
            code = _codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _new = True
        _used.add(source)
        source = code
    if globals is None:  # exec's own default: the caller's namespaces
        frame = sys._getframe(1)
        globals, locals = frame.f_globals, frame.f_locals if locals is None else locals
    exec(source, globals, locals)


def install() -> None:
    """Load the kept code and give ``dataclasses`` the caching ``exec``; the new code is saved at exit."""
    global _codes, _installed_by
    import dataclasses

    if _installed_by is not None:
        return
    try:
        with open(PATH, "rb") as fh:
            magic, codes = marshal.loads(fh.read())  # loads: marshal.load reads a file piece by piece
        if magic == _magic() and isinstance(codes, dict):
            _codes = codes
    except (OSError, EOFError, ValueError, TypeError):
        pass  # none yet, or unreadable: compiled as before
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # a module global shadows the builtin there
    _installed_by = os.getpid()
    atexit.register(save)


def save() -> None:
    """Write the code compiled this run (once, from the process that installed the cache)."""
    global _new
    if not _new or sys.dont_write_bytecode or os.getpid() != _installed_by:
        return
    codes = _codes if len(_codes) <= MAX_ENTRIES else {s: _codes[s] for s in _used}
    tmp = f"{PATH}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(PATH), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(marshal.dumps((_magic(), codes)))
        os.replace(tmp, PATH)  # readers see the old file or the new one, never a half
        _new = False
    except OSError:  # a read-only install: compiled each run, as without the cache
        try:
            os.unlink(tmp)
        except OSError:
            pass

"""The Python passes' facts stay what they were: speed work on the walks changes no fact.

The facts of ``import_time``, ``python_source``, ``promotion_source`` and ``module_imports``
are compared, as their ``repr``, with goldens written by the code before the speed work
(``tests/golden/python_passes/``): one fixture module that exercises every branch the walks
take (nested scopes, guards, chains, conditions, kernels, a non-ASCII line), and a digest of
the facts of every ``.py`` file of the numpy 2.0.2 wheel.  A deliberate change of a fact
regenerates them: ``PYTHONPATH=src python tests/test_python_passes_unchanged.py``.
"""

from __future__ import annotations

import hashlib
import pickle
import pprint
import sys
import zipfile
from pathlib import Path

import pytest

from cuaudit.facts.import_time import _Reader
from cuaudit.facts.module_imports import module_imports
from cuaudit.facts.promotion import promotion_facts
from cuaudit.facts.python_source import python_source_facts
from cuaudit.formats.python import PythonModule, parse_python, parse_python_text

GOLDEN = Path(__file__).parent / "golden" / "python_passes"
NUMPY = "numpy-2.0.2-cp311-*.whl"

FIXTURE = '''\
"""A module that takes every turn of the Python passes."""
from __future__ import annotations
import os, sys as system
import numpy as np
import cupy as cp
from typing import TYPE_CHECKING
from . import sibling
from ..parent import thing as renamed, other
if TYPE_CHECKING:
    from collections import OrderedDict
try:
    import fast
except ImportError:
    fast = None
else:
    import fast.extra
finally:
    cleanup = os.path.join("a", "b")
if sys.platform == "win32":
    import winreg
elif os.name != "nt":
    from . import posix_only
with suppress(ImportError):
    from .optional import maybe
__all__ = ["thing", "other"] + ["more"]
__all__ += ("late",)
_TABLE = {"lazy_a": ".a", "lazy_b": ".b"}
NAMES = ["x", "y"]
for _name in ("one", "two"):
    globals()[_name] = importlib.import_module("." + _name, __name__)
for lib in ("chardet", "charset_normalizer"):
    importlib.import_module(lib)
CONST = 3
value = (walrus := os.getcwd())
sys.modules[__name__ + ".alias"] = sibling
del NAMES

def __getattr__(name):
    if name in _TABLE:
        return importlib.import_module(_TABLE[name], __name__)
    if name == "gone":
        raise AttributeError(name)
    return getattr(sibling.sub, name)

@decorate(os.sep)
def outer(a, /, b=np.uint8(300), *args, c, d=1, **kw):
    global CONST
    import json
    os = a
    local = os.path.sep
    arr = np.zeros(3, dtype=np.uint8)
    out = arr + 300
    half = np.float32(1.5) * 2.0
    big = np.array([300], dtype=np.int8)
    cast = np.can_cast(1, np.int8)
    try:
        system.platform.startswith("x")
    except AttributeError:
        pass
    if hasattr(np.linalg, "lapack_lite"):
        np.linalg.lapack_lite.thing()
    default = getattr(os.path, "sep", "/")
    def inner(x=json.dumps({})):
        from .deep import helper
        y = np.ones(2, dtype="float32") * 1e39
        return helper(x) + renamed.value + y
    f = lambda z: system.exit(z)
    return [inner(i) for i in range(3)], globals().update(vars(sibling))

class Thing(Base, metaclass=Meta):
    _value = "codata"
    _versions = dict(codata="codata2022")
    @classmethod
    def get(cls):
        return cls._versions[cls._value]
    @util.preload_module("pkg.sub")
    def method(self):
        import pkg.sub
        return self.x.y.z + pkg.sub.attr
    class Inner:
        @staticmethod
        def deep():
            return importlib.import_module(".x", "pkg")

@cp.fuse()
def kernel(x, y):
    return x * 2 + y / 3.0 + cp.maximum(x, 1)

k2 = cp.fuse(kernel_name="k2")(lambda a: a + 1)
result = kernel(cp.arange(3), 5)
cp.copyto(dst, 1.5)
match command:
    case "go":
        import go_module
    case _:
        pass
while retry():
    from . import retried
    break
async def coroutine():
    async with lock() as held:
        await np.asarray(held).astype(np.uint16) + 70000
text = "ünïcödé"; chain = np.linalg.norm; tail = renamed.attr.deep
'''


def facts_of(module: PythonModule) -> dict[str, object]:
    """The four passes' facts of one parsed module, as the extractors give them."""
    return {
        "import_time": _Reader().run(module.tree) if module.ok else None,
        "python_source": python_source_facts(module),
        "promotion_source": promotion_facts(module),
        "module_imports": module_imports(module),
    }


def fixture_text() -> str:
    facts = facts_of(parse_python_text(FIXTURE, "pkg/mod.py"))
    return "".join(f"== {name}\n{pprint.pformat(value, width=110, sort_dicts=False)}\n" for name, value in facts.items())


def numpy_digest(wheel: Path) -> str:
    """sha256 over the facts of every ``.py`` member of the wheel, by path and pass."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(n for n in zf.namelist() if n.endswith(".py")):
            for pass_name, value in facts_of(parse_python(zf.read(name), name)).items():
                digest.update(f"{name}\0{pass_name}\0{value!r}\n".encode())
    return digest.hexdigest()


def test_the_fixture_module_gives_the_facts_it_always_gave():
    assert fixture_text() == (GOLDEN / "fixture.txt").read_text(encoding="utf-8")


def test_facts_survive_their_pickle():
    # what the fact store and the lazily decoded facts keep is the same fact again
    for value in facts_of(parse_python_text(FIXTURE, "pkg/mod.py")).values():
        back = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == value and repr(back) == repr(value)


@pytest.mark.corpus
@pytest.mark.slow
def test_numpy_wheel_sources_give_the_facts_they_always_gave(corpus):
    from conftest import corpus_file

    wheel = corpus_file(corpus, NUMPY)
    assert numpy_digest(wheel) == (GOLDEN / "numpy-2.0.2.sha256").read_text().strip()


if __name__ == "__main__":  # regenerate the goldens (a deliberate change of the facts)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "fixture.txt").write_text(fixture_text(), encoding="utf-8")
    wheels = sorted((Path(sys.argv[1]) if len(sys.argv) > 1 else Path.home() / ".cache/cuaudit/corpus").glob(NUMPY))
    if wheels:
        (GOLDEN / "numpy-2.0.2.sha256").write_text(numpy_digest(wheels[0]) + "\n")

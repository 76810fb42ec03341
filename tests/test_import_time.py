"""The import-time model (issue 12): what importing a package really runs, on packages built here.

Each case is one of the causes the runtime measurement found (sympy, Pygments,
pydantic, anyio, setuptools, sqlalchemy); ``test_accuracy.py`` checks the
same kind of packages against real imports.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

from cuaudit import audit
from cuaudit.analysis.import_time import ImportTimeModel
from cuaudit.config import Config
from cuaudit.facts.import_time import parse_import_time


def run(paths):
    return audit([str(p) for p in paths], config=Config(cache=False, select=("CU1",)))


def keys(report, code):
    return sorted(f.key for f in report.findings if f.code == code)


def message(report, key):
    f = next(f for f in report.findings if f.key == key)
    return f.message + " " + str(f.evidence.get("why", ""))


def imported_for_real(root, probe: str, *flags: str) -> list[str]:
    """What ``probe`` prints, run by a fresh ``python -I`` with ``root`` first on sys.path: the runtime's answer."""
    import subprocess
    import sys

    code = f"import sys; sys.path.insert(0, {str(root)!r})\n{probe}"
    return subprocess.run([sys.executable, "-I", *flags, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_the_program_keeps_order_conditions_and_calls():
    prog = parse_import_time(src("""
        import sys
        from typing import TYPE_CHECKING
        DEBUG = False
        if TYPE_CHECKING or not setup():
            from . import a
        try:
            from . import b
        except ImportError:
            from . import c
        _reg = _Registry()
        go = _reg.go
        go("x")
        sys.modules[__name__] = _Mod(__name__)
    """))
    imports = [(e.name, [c.expr for c in e.conditions]) for e in prog.effects if e.kind == "import" and e.level]
    assert imports == [("a", ["TYPE_CHECKING or not setup()"]), ("b", []), ("c", ["<except ImportError>"])]
    assert prog.effects[[e.name for e in prog.effects].index("c")].conditions[0].try_imports == (("", "b", 1),)
    assert ("DEBUG", False) in prog.constants
    assert [e.callee for e in prog.effects if e.kind == "call"] == ["setup", "_Registry", "go", "_Mod"]
    assert prog.swap is not None and prog.swap.cls == "_Mod" and not prog.swap.copies_dict


def test_static_branches_and_either_way(tree_factory):
    root = tree_factory({
        "br/__init__.py": src("""
            import os, sys
            from typing import TYPE_CHECKING
            ENABLED = False
            if TYPE_CHECKING:
                from . import typed
            if ENABLED:
                from . import flagged
            if sys.version_info >= (3, 0):
                from . import modern
            if os.environ.get("BR_EXTRA"):
                from . import extra
            if _decide():
                from . import either
            try:
                from . import real
            except ImportError:
                from . import fallback
        """),
        **{f"br/{n}.py": "" for n in ("typed", "flagged", "modern", "extra", "either", "real", "fallback")},
    })
    report = run([root])
    # what cannot run is a trap; what runs is bound; what may run is neither (no finding)
    assert keys(report, "CU101") == ["br.extra", "br.fallback", "br.flagged", "br.typed"]
    assert "either" not in " ".join(keys(report, "CU101"))


def test_shadowing_by_a_same_named_object(tree_factory):
    root = tree_factory({
        "sh/__init__.py": "from .series import series\n",
        "sh/series/__init__.py": "from .impl import series\n",
        "sh/series/impl.py": "def series(): pass\n",
        "sh/series/gruntz.py": "",
    })
    report = run([root])
    assert "sh.series.gruntz" in keys(report, "CU101")
    assert "re-binds series to an object" in message(report, "sh.series.gruntz")


def test_sys_modules_replacement_with_a_copied_dict(tree_factory):
    root = tree_factory({
        "lex/__init__.py": src("""
            import sys, types
            from ._mapping import LEXERS
            from . import kept
            class _automodule(types.ModuleType):
                def __getattr__(self, name):
                    info = LEXERS.get(name)
                    if info:
                        return info
                    raise AttributeError(name)
            oldmod = sys.modules[__name__]
            newmod = _automodule(__name__)
            newmod.__dict__.update(oldmod.__dict__)
            sys.modules[__name__] = newmod
        """),
        "lex/_mapping.py": "LEXERS = {'PythonLexer': ('lex.python', 'Python')}\n",
        "lex/kept.py": "", "lex/python.py": "",
    })
    report = run([root])
    assert keys(report, "CU102") == ["lex.python"]
    assert "LEXERS" in message(report, "lex.python")


def test_getattr_table_with_a_raising_fallback(tree_factory):
    root = tree_factory({
        "pd/__init__.py": src("""
            from ._migration import getattr_migration
            _dynamic_imports = {"BaseModel": (__spec__.parent, ".main")}
            def __getattr__(attr_name):
                dynamic_attr = _dynamic_imports.get(attr_name)
                if dynamic_attr is None:
                    return _getattr_migration(attr_name)
                from importlib import import_module
                return import_module(dynamic_attr[1], package=dynamic_attr[0])
            _getattr_migration = getattr_migration(__name__)
        """),
        "pd/_migration.py": src("""
            def getattr_migration(module):
                def wrapper(name):
                    if name == "__path__":
                        raise AttributeError(name)
                    raise AttributeError(f"module {module!r} has no attribute {name!r}")
                return wrapper
        """),
        "pd/main.py": "BaseModel = 1\n",
    })
    report = run([root])
    assert keys(report, "CU102") == ["pd.main"]
    assert "falls back to _getattr_migration(), which raises AttributeError" in message(report, "pd.main")


def test_calls_at_import_time_are_followed(tree_factory):
    root = tree_factory({
        "st/__init__.py": "from . import monkey\nmonkey.patch_all()\n",
        "st/monkey.py": "def patch_all():\n    _patch()\ndef _patch():\n    from . import dist\n",
        "st/dist.py": "", "st/lonely.py": "",
        # a registry that imports computed names: what its users name may be imported (no claim)
        "sa/__init__.py": "from .util import preloaded\nfrom . import engine\npreloaded.import_prefix('sa')\n",
        "sa/engine.py": "from .util import preloaded\n@preloaded.preload_module('sa.orm')\ndef f(): pass\n",
        "sa/util/__init__.py": "",
        "sa/util/preloaded.py": src("""
            class _ModuleRegistry:
                def __init__(self):
                    self.module_registry = set()
                def preload_module(self, *deps):
                    self.module_registry.update(deps)
                    return lambda fn: fn
                def import_prefix(self, path):
                    for module in self.module_registry:
                        __import__(module)
            _reg = _ModuleRegistry()
            preload_module = _reg.preload_module
            import_prefix = _reg.import_prefix
        """),
        "sa/orm.py": "", "sa/other.py": "",
    })
    report = run([root])
    assert keys(report, "CU101") == ["sa.other", "st.lonely"]


def test_extension_before_source(tree_factory):
    """`x.py` beside `x.cpython-*.so`: CPython imports the extension, so the .py's imports do not run."""
    root = tree_factory({
        "ex/__init__.py": "from . import fast\n",
        "ex/fast.py": "from . import helper\n",
        "ex/fast.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
        "ex/helper.py": "",
    })
    report = run([root])
    # the .py's `from . import helper` never runs; the extension (no import evidence here) runs instead
    assert keys(report, "CU101") == ["ex.helper"]
    from cuaudit.analysis.module_tree import artifact_modules
    from cuaudit.inputs import resolve

    art = resolve([str(root)])[0]
    assert artifact_modules(art, art.members)["ex.fast"].kind == "extension"


def test_condition_evaluation_reports_its_assumptions():
    class Uni:
        sys_platform, os_name, python_version = "linux", "posix", (3, 11, 7)

        def get(self, name):
            return None

        def exists(self, name):
            return False

    prog = parse_import_time("import os\nif os.getenv('FORCE_X', '0') == '1':\n    import json\n")
    model = ImportTimeModel(Uni(), lambda name: prog)
    cond = next(e for e in prog.effects if e.module == "json").conditions
    t = model.runs("m", cond)
    assert t.value is False and "FORCE_X is unset" in (t.assumed or "FORCE_X is unset")


def test_code_reaching_through_a_shadowed_name(tree_factory):
    """`import sh.series; sh.series.gruntz`: `sh.series` is the function the package re-bound."""
    root = tree_factory({
        "sh/__init__.py": "from .series import series\n",
        "sh/series/__init__.py": "from .impl import series\n",
        "sh/series/impl.py": "def series(): pass\n",
        "sh/series/gruntz.py": "",
        "user.py": "import sh.series\nsh.series.gruntz\n",
    })
    report = run([root])
    found = [f for f in report.findings if f.code == "CU104"]
    assert [(f.location.member, f.location.line) for f in found] == [("user.py", 2)]
    assert "from sh.series import gruntz" in found[0].fix.description and not found[0].fix.edits


def test_a_computed_import_at_import_time_makes_its_package_unknown(tree_factory):

    root = tree_factory({
        "cp/__init__.py": "from . import helper\n",
        "cp/helper.py": "import importlib\nfor n in ('late',):\n    importlib.import_module('cp.' + n)\n",
        "cp/late.py": "", "cp/other.py": "",
        "cp/sub/__init__.py": "", "cp/sub/deep.py": "",
        # a name the model cannot compute makes the verdicts of its package unknown
        "cq/__init__.py": "from . import helper\n",
        "cq/helper.py": "import importlib, os\nimportlib.import_module('cq.' + os.environ['CQ'])\n",
        "cq/late.py": "", "cq/other.py": "", "cq/sub/__init__.py": "", "cq/sub/deep.py": "",
    })
    # the loop over literal names imports cp.late (kept "either way"), nothing else of cp;
    # cq.sub is no module of cq.helper's package level
    assert keys(run([root]), "CU101") == ["cp.other", "cp.sub", "cp.sub.deep", "cq.sub.deep"]
    probe = "import cp\nprint(hasattr(cp, 'late'), hasattr(cp, 'other'), hasattr(cp, 'sub'))\n"
    out = imported_for_real(root, probe)
    assert out == ["True", "False", "False"]


def test_what_a_maybe_import_reaches_is_imported_either_way_too(tree_factory):
    """A module imported only in one case brings its closure along "either way": mp.b and mp.c come
    with mp.a and mp.d (one import cycle, one closure: added once), mp.e with nothing."""
    root = tree_factory({
        "mp/__init__.py": "import platform\nif platform.machine() == 'x86_64':\n    from . import a\n    from . import d\n",
        "mp/a.py": "from . import b, d\n",
        "mp/d.py": "from . import a, c\n",
        "mp/b.py": "", "mp/c.py": "", "mp/e.py": "",
    })
    report = run([root])
    assert keys(report, "CU101") == ["mp.e"]
    out = imported_for_real(root, "import mp\nprint(*(hasattr(mp, n) for n in 'bce'))\n")
    assert out[2] == "False" and out[:2] == [out[0]] * 2  # what the model cannot tell: the machine decides


FAILING = {
    "op/__init__.py": src("""
        from contextlib import suppress
        with suppress(ImportError):
            from op.fast import F
            from op import after
        try:
            from .slow import thing
        except ImportError:
            thing = None
        else:
            from . import viaelse
        try:
            from .tzwin import TzWin
        except ImportError:
            TzWin = None
        from . import plain, fsys
    """),
    # fontTools.misc.filesystem: the `else` of a `try: __import__(...)` that fails does not run
    "op/fsys.py": src("""
        try:
            __import__("fs_not_installed")
        except ImportError:
            from . import _base as base
        else:
            import fs_not_installed.base as base
    """),
    "op/_base.py": "",
    "op/fast.py": "import not_installed_dep\nF = 1\n",
    "op/after.py": "", "op/viaelse.py": "", "op/plain.py": "",
    "op/slow.py": "import os\nfrom another_missing import thing\n",
    # dateutil.tz.win: both the module and its fallback are Windows-only
    "op/tzwin.py": "try:\n    import winreg\nexcept ImportError:\n    import _winreg as winreg\nTzWin = 1\n",
    # imageio.plugins: the asked name is imported, and its ImportError becomes AttributeError
    "op/plugins/__init__.py": src("""
        import importlib
        def __getattr__(name):
            try:
                return importlib.import_module(f"op.plugins.{name}")
            except ImportError:
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    """),
    "op/plugins/good.py": "import json\n",
    # urllib3.contrib.emscripten: the parent's own import fails, so its pairs are no claim
    "op/broken/__init__.py": "from .conn import X\n", "op/broken/conn.py": "import js_not_installed\nX = 1\n",
    "op/broken/other.py": "",
    "op/plugins/bad.py": "import cv2_not_installed\n",
}


def test_the_walk_extracts_what_the_failing_imports_verdicts_read_beyond_the_closures(
        tmp_path, wheel_factory, monkeypatch, walking):
    """Whether importing a submodule fails is asked of programs no import closure holds: the
    submodules a ``__getattr__`` imports by name (op.plugins) and a sibling a call names by a keyword
    string (op.kw's ``register(lextab="tab")``).  The walk extracts them with the closures, in the
    workers, instead of the verdicts reading them one by one afterwards (132 modules, 0.45 s of the
    GPU machine's forked child); the verdicts are those of an audit without workers."""
    from conftest import make_venv

    import cuaudit.extraction as extraction
    import cuaudit.rule_run as rule_run

    import sysconfig

    from conftest import compile_so

    files = {**FAILING, "op/kw/__init__.py": "def register(**kw):\n    return kw\nregister(lextab='tab')\n",
             "op/kw/tab.py": "import gone_missing_dep\n", "op/kw/other.py": ""}
    # an extension module compiled from the source beside it (fontTools.cu2qu): that source's
    # imports are the extension's, read when a closure meets it
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    module = textwrap.dedent(r"""
        #include <Python.h>
        static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "core", NULL, -1, NULL};
        const char *volatile source = "core.py";
        PyMODINIT_FUNC PyInit_core(void) { return PyModule_Create(&def); }
    """)
    so = compile_so(tmp_path, f"core{ext}", module, flags=["-I", sysconfig.get_paths()["include"]])
    ft = {"ft/__init__.py": "from . import core\n", f"ft/core{ext}": so.read_bytes(),
          "ft/core.py": "from . import errs\n", "ft/errs.py": "import gone_too\n", "ft/cli.py": ""}
    py = make_venv(tmp_path / "venv", [wheel_factory("op", "1.0", files), wheel_factory("ft", "1.0", ft)])
    conf = Config(cache=False, select=("CU101", "CU102"))
    serial = audit([], env=str(py), config=dataclasses.replace(conf, jobs=1))
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    monkeypatch.setattr(rule_run, "_may_fork", lambda config: False)  # the verdicts in this process
    later: list[str] = []
    real_load = extraction.Extraction._load

    def load(self, wanted):
        if not walking[0]:
            later.extend(path for _i, path, name in wanted if name in ("import_time", "python_source")
                         and path.startswith(("op/", "ft/")))
        return real_load(self, wanted)

    monkeypatch.setattr(extraction.Extraction, "_load", load)
    report = audit([], env=str(py), config=dataclasses.replace(conf, jobs=2))
    assert [(f.code, f.key, f.message) for f in report.findings] == [(f.code, f.key, f.message) for f in serial.findings]
    assert "op.plugins.bad" in {f.key for f in report.findings}  # the verdict that read op/plugins/bad.py
    assert {"ft.cli"} <= {f.key for f in report.findings if f.code == "CU101"}
    assert not {"op/plugins/bad.py", "op/plugins/good.py", "op/kw/tab.py", "ft/core.py", "ft/errs.py"} & set(later), later


def test_imports_that_fail_in_a_known_environment(tmp_path, wheel_factory):
    """An environment is known in full: a module nobody installed fails to import, the `try`
    (or `with suppress(ImportError)`) around it stops there, and the module importing it is no
    attribute of its parent; each verdict is checked against a real import in that venv."""
    import subprocess

    from conftest import make_venv

    py = make_venv(tmp_path / "venv", [wheel_factory("op", "1.0", FAILING)])
    report = audit([], env=str(py), config=Config(cache=False, select=("CU101", "CU102")))
    traps = {f.key: f.code for f in report.findings if f.key.startswith("op.")}
    assert traps == {"op.fast": "CU101", "op.after": "CU101", "op.slow": "CU101", "op.viaelse": "CU101",
                     "op.tzwin": "CU101", "op.plugins": "CU101", "op.plugins.bad": "CU102", "op.broken": "CU101"}
    assert "not_installed_dep is not installed" in message(report, "op.fast")
    assert "cv2_not_installed is not installed" in message(report, "op.plugins.bad")
    probe = ("import op\nprint('plugins', hasattr(op, 'plugins'))\nimport op.plugins\n"
             "for p, s in [(op, 'fast'), (op, 'after'), (op, 'slow'), (op, 'viaelse'), (op, 'tzwin'), (op, 'plain'), (op, 'fsys'), (op, 'broken'),"
             " (op.plugins, 'good'), (op.plugins, 'bad')]:\n"
             "    print(s, hasattr(p, s))\n")
    out = subprocess.run([str(py), "-I", "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    runtime_traps = {s for s, has in zip(out[::2], out[1::2]) if has == "False"}
    assert runtime_traps == {k.rpartition(".")[2] for k in traps}


def test_missing_dependencies_of_a_lone_wheel_are_no_evidence(wheel_factory):
    """Checked alone, a wheel's dependencies are simply not in view: nothing is taken to fail."""
    report = run([wheel_factory("op", "1.0", FAILING)])
    assert not {"op.fast", "op.slow", "op.plugins.bad", "op.tzwin"} & set(keys(report, "CU101") + keys(report, "CU102"))


def test_getattr_forwarding_to_a_dotted_module(tree_factory):
    """gpytorch.utils: `if hasattr(linear_operator.utils, name): return getattr(linear_operator.utils, name)`
    serves what that module has (its submodule `cholesky` too) and raises for the rest."""

    root = tree_factory({
        "gp/__init__.py": "from . import utils\n",
        "gp/utils/__init__.py": src("""
            import warnings as _warnings
            import lo
            from . import errors
            def __getattr__(name):
                if hasattr(lo.utils, name):
                    _warnings.warn(f"gp.utils.{name} is deprecated", DeprecationWarning)
                    return getattr(lo.utils, name)
                raise AttributeError(f"module gp.utils has no attribute {name}")
        """),
        "gp/utils/errors.py": "", "gp/utils/cholesky.py": "", "gp/utils/other.py": "",
        "lo/__init__.py": "from . import utils\n",
        "lo/utils/__init__.py": "from .cholesky import psd_safe_cholesky\n",
        "lo/utils/cholesky.py": "def psd_safe_cholesky(): pass\n",
    })
    report = run([root])
    assert keys(report, "CU102") == ["gp.utils.other"]
    assert "forwards to lo.utils" in message(report, "gp.utils.other")
    probe = "import gp\nprint(hasattr(gp.utils, 'cholesky'), hasattr(gp.utils, 'other'))\n"
    out = imported_for_real(root, probe, "-W", "ignore")
    assert out == ["True", "False"]


def test_a_module_named_by_a_literal_in_a_loaded_call_is_no_claim(tree_factory):
    """astropy: `parsing.lex(lextab="generic_lextab")` makes ply import `generic_lextab` by a name it
    builds with `exec`; the model cannot follow that, so it abstains on that module only."""

    root = tree_factory({
        "ap/__init__.py": "from . import fmt\n",
        "ap/parsing.py": "def lex(lextab):\n    exec('import %s' % ('ap.fmt.' + lextab))\n",
        "ap/fmt/__init__.py": "from .generic import Generic\ndef __getattr__(name):\n    raise AttributeError(name)\n",
        "ap/fmt/generic.py": src("""
            from .. import parsing
            class Generic:
                @classmethod
                def lexer(cls):
                    return parsing.lex(lextab="generic_lextab")
            Generic.lexer()
        """),
        "ap/fmt/generic_lextab.py": "TAB = 1\n", "ap/fmt/unused.py": "",
    })
    report = run([root])
    assert keys(report, "CU102") == ["ap.fmt.unused"]
    probe = "import ap\nprint(hasattr(ap.fmt, 'generic_lextab'), hasattr(ap.fmt, 'unused'))\n"
    out = imported_for_real(root, probe)
    assert out == ["True", "False"]


def test_a_star_import_rebinds_a_name_to_another_module(tree_factory):
    """nltk: `from nltk.translate import *` (no __all__) binds `metrics` to the submodule
    nltk.translate.metrics that its imports set, so `nltk.metrics.scores` is looked up there."""

    root = tree_factory({
        # the package's own `from nl import metrics` afterwards keeps the attribute it has
        "nl/__init__.py": "from nl.metrics import *\nfrom nl.translate import *\nfrom nl import metrics\n",
        "nl/metrics/__init__.py": "from nl.metrics.scores import accuracy\n",
        "nl/metrics/scores.py": "def accuracy(): pass\n",
        "nl/translate/__init__.py": "from nl.translate.metrics import rate\n",
        "nl/translate/metrics.py": "def rate(): pass\n",
        # networkx.algorithms: the star binds `conn` to nx.assort.conn, then the first load of
        # nx.conn (by nx.late) sets the attribute back to the submodule
        "nx/__init__.py": "from nx.assort import *\nfrom nx import late\nfrom nx import conn\n",
        "nx/assort/__init__.py": "from nx.assort.conn import *\n", "nx/assort/conn.py": "",
        "nx/late.py": "import nx.conn\n", "nx/conn/__init__.py": "from . import cuts\n", "nx/conn/cuts.py": "",
        # numba.core.types: a computed __all__ is what the star takes, not the namespace
        "nu/__init__.py": "from nu import misc, np\nfrom nu.types import *\n",
        "nu/misc/__init__.py": "", "nu/misc/special.py": "",
        "nu/types/__init__.py": "import nu.other as np\nfrom .misc import *\nnames = 'Dummy'\n__all__ = names.split()\n",
        "nu/other.py": "",
        "nu/np/__init__.py": "", "nu/np/support.py": "",
        "nu/types/misc.py": "Dummy = 1\n",
    })
    report = run([root])
    assert "nu.misc.special" in keys(report, "CU101")
    assert "neither binds nor imports special" in message(report, "nu.misc.special")
    assert "re-binds" not in message(report, "nu.np.support")  # the computed __all__ does not take np
    assert "nl.metrics.scores" in keys(report, "CU101")
    assert "re-binds metrics to the module nl.translate.metrics" in message(report, "nl.metrics.scores")
    assert "nl/__init__.py:2 " in message(report, "nl.metrics.scores")
    assert "nx.conn.cuts" not in keys(report, "CU101")
    probe = "import nl, nx\nprint(nl.metrics.__name__, hasattr(nl.metrics, 'scores'), nx.conn.__name__)\n"
    out = imported_for_real(root, probe)
    assert out == ["nl.translate.metrics", "False", "nx.conn"]


def test_globals_updated_from_another_module_makes_the_package_unknown(tree_factory):
    """cuda.core 1.2.0: a function called at import runs `globals().update(cu13.__dict__)`, so the
    package takes cu13's `__name__` and `__path__`, and its own `from cc import tools` afterwards
    imports cc.v2.tools. The model abstains on the package and everything below it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import accuracy

    root = tree_factory({
        "cc/__init__.py": src("""
            def _import_versioned_module():
                import importlib
                try:
                    versioned_mod = importlib.import_module(".v2", __package__)
                    globals().update(versioned_mod.__dict__)
                except ImportError:
                    pass
            _import_versioned_module()
            del _import_versioned_module
            from cc import tools
        """),
        "cc/tools.py": "", "cc/v1/__init__.py": "", "cc/v1/extra.py": "",
        "cc/v2/__init__.py": "", "cc/v2/tools.py": "", "cc/v2/more.py": "",
        # vars() is the same namespace copy, at module level
        "vs/__init__.py": "from . import impl\nglobals().update(vars(impl))\n", "vs/impl.py": "", "vs/late.py": "",
        # a module that only reads another's __dict__ keeps its identity
        "ok/__init__.py": "from . import impl\nnames = dict(impl.__dict__)\n", "ok/impl.py": "", "ok/late.py": "",
    })
    found = accuracy.static_verdicts(None, [str(root)])
    verdict = {f"{p}.{s}": v for (p, s), v in found.items()}
    for key in ("cc.v2.tools", "cc.v2.more", "cc.v1", "cc.v1.extra", "cc.tools", "vs.late"):
        assert verdict[key].static == "unknown", key
    assert "cc:5 updates its globals from versioned_mod.__dict__" in verdict["cc.v2.tools"].detail
    assert "vs:2 updates its globals from impl.__dict__" in verdict["vs.late"].detail
    assert verdict["ok.late"].static == "trap"
    assert keys(run([root]), "CU101") == ["ok.late"]
    # the runtime: cc.v2.tools is loaded (a claim would have been false), cc.v1 is not
    probe = "import cc\nprint(cc.__name__, hasattr(cc.v2, 'tools'), hasattr(cc, 'v1'), hasattr(cc.v2, 'more'))\n"
    out = imported_for_real(root, probe)
    assert out == ["cc.v2", "True", "False", "False"]


def test_a_computed_module_name_is_evaluated_through_class_attributes_at_their_defaults(tree_factory):
    """astropy.constants.config: `importlib.import_module(".constants." + phys_version, "astropy")`
    with `phys_version = astropy.physical_constants.get()`, a class method that returns
    `cls.validate(cls._value)`, whose override looks the default up in a class table. The model
    evaluates the name, so the other constants versions are traps; a name read from the
    environment stays unknown."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import accuracy

    root = tree_factory({
        "sc/__init__.py": src("""
            from .utils.state import ScienceState
            class base_version(ScienceState):
                _value = "test"
                _versions = dict(test="test")
                @classmethod
                def validate(cls, value):
                    if value not in cls._versions:
                        raise ValueError(value)
                    return cls._versions[value]
            class physical(base_version):
                _value = "const80"
                _versions = dict(data2022="data2022", data2018="data2018", const80="data2022", const40="data2018")
        """),
        "sc/utils/__init__.py": "",
        "sc/utils/state.py": src("""
            class ScienceState:
                _value = None
                @classmethod
                def get(cls):
                    return cls.validate(cls._value)
                @classmethod
                def validate(cls, value):
                    return value
        """),
        "sc/consts/__init__.py": "from .config import data\n",
        "sc/consts/config.py": src("""
            import importlib
            import os
            import sc
            version = sc.physical.get()
            data = importlib.import_module(".consts." + version, "sc")
            alt = importlib.import_module(f"sc.consts.{sc.physical._value}_alt")
        """),
        "sc/consts/data2022.py": "", "sc/consts/data2018.py": "", "sc/consts/const40.py": "",
        "sc/consts/const80.py": "", "sc/consts/const80_alt.py": "",
        "sc/dyn/__init__.py": "import importlib, os\nimportlib.import_module('sc.dyn.' + os.environ.get('SC_BACKEND', 'a'))\n",
        "sc/dyn/a.py": "", "sc/dyn/b.py": "",
    })
    found = accuracy.static_verdicts(None, [str(root)])
    verdict = {f"{p}.{s}": v for (p, s), v in found.items()}
    static = {k: v.static for k, v in verdict.items() if k.startswith(("sc.consts.", "sc.dyn."))}
    assert static == {"sc.consts.config": "works", "sc.consts.data2022": "works", "sc.consts.const80_alt": "works",
                      "sc.consts.data2018": "trap", "sc.consts.const40": "trap", "sc.consts.const80": "trap",
                      "sc.dyn.a": "unknown", "sc.dyn.b": "unknown"}
    assert ("sc.consts.config:5 imports sc.consts.data2022 (`'.consts.' + version` with the class attributes"
            in verdict["sc.consts.data2018"].detail)
    probe = "import sc.consts\nprint(*(hasattr(sc.consts, n) for n in ('data2022', 'const80_alt', 'data2018', 'const40', 'const80')))\n"
    out = imported_for_real(root, probe)
    assert out == ["True", "True", "False", "False", "False"]


def test_computed_names_from_a_loop_over_literals_and_from_the_module_spec(tree_factory):
    """requests.compat: `for lib in ("chardet", "charset_normalizer"): importlib.import_module(lib)`
    in a function called at import imports one of those names, nothing of requests; sklearn's
    vendored array_api_compat: `__import__(__spec__.parent + ".linalg")` is the package's own
    linalg. Neither makes the whole package unknown any more."""

    root = tree_factory({
        "rq/__init__.py": "from . import compat\n",
        "rq/compat.py": src("""
            import importlib
            def _resolve():
                found = None
                for lib in ("chardet_not_installed", "json"):
                    if found is None:
                        try:
                            found = importlib.import_module(lib)
                        except ImportError:
                            pass
                return found
            chardet = _resolve()
        """),
        "rq/help.py": "",
        "ac/__init__.py": "from . import numpy\n",
        "ac/numpy/__init__.py": "__import__(__spec__.parent + '.linalg')\n__import__(__name__ + '.fft')\n",
        "ac/numpy/linalg.py": "", "ac/numpy/fft.py": "", "ac/numpy/other.py": "", "ac/torch/__init__.py": "",
    })
    assert keys(run([root]), "CU101") == ["ac.numpy.other", "ac.torch", "rq.help"]
    probe = "import rq, ac\nprint(hasattr(rq, 'help'), hasattr(ac, 'torch'), hasattr(ac.numpy, 'linalg'), hasattr(ac.numpy, 'fft'))\n"
    out = imported_for_real(root, probe)
    assert out == ["False", "False", "True", "True"]


EXT_MODULE = r"""
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, NULL};
const char *volatile names[] = {"%(pkg)s", "cuda", "style", "%(marker)s"};
PyMODINIT_FUNC PyInit_%(name)s(void) {
    PyObject *m = PyModule_Create(&def);
    %(body)s
    return m;
}
"""


def test_bare_names_in_a_compiled_module_are_imports_only_in_cython(tree_factory):
    """Cython's `from pkg import sub` keeps "pkg" and "sub" as separate C strings, so the model
    counts a bare name beside its package's name as an import; a hand-written or pybind11 module
    (numba's `_dispatcher` holds "cuda", matplotlib's `ft2font` "style") imports nothing by them."""
    import sysconfig

    from conftest import compile_so

    ext = sysconfig.get_config_var("EXT_SUFFIX")
    root = tree_factory({
        "nb/__init__.py": "from . import _disp\n", "nb/cuda/__init__.py": "", "nb/style.py": "",
        "cy/__init__.py": "from . import _mod\n", "cy/cuda/__init__.py": "", "cy/style.py": "",
    })
    include = ["-I", sysconfig.get_paths()["include"]]
    compile_so(root / "nb", f"_disp{ext}", EXT_MODULE % {"name": "_disp", "pkg": "nb", "marker": "dispatch", "body": ""},
               flags=include)
    # what Cython generates for `from cy import cuda`, with the runtime name every Cython module holds
    body = 'PyObject *f = Py_BuildValue("(s)", names[1]); if (!PyImport_ImportModuleLevel(names[0], NULL, NULL, f, 0)) return NULL;'
    compile_so(root / "cy", f"_mod{ext}", EXT_MODULE % {"name": "_mod", "pkg": "cy", "marker": "cython_runtime", "body": body},
               flags=include)
    assert keys(run([root]), "CU101") == ["nb.cuda", "nb.style"]
    probe = "import nb, cy\nprint(hasattr(nb, 'cuda'), hasattr(nb, 'style'), hasattr(cy, 'cuda'))\n"
    out = imported_for_real(root, probe)
    assert out == ["False", "False", "True"]


def test_a_star_import_from_an_extension_compiled_from_the_source_beside_it(tree_factory):
    """fontTools.cu2qu: `from .cu2qu import *` runs `cu2qu.cpython-*.so`, compiled (Cython's
    pure-Python mode) from the `cu2qu.py` it shadows: that source's literal `__all__` is what the
    star takes, so `fontTools.cu2qu.cli` is a trap, and its imports are what the extension
    imports (`fontTools.cu2qu.errors` works). The extension names that file among its strings;
    one with no source beside it keeps its names unknown (and `test_extension_before_source`: a
    .py the extension does not name is not its source)."""
    import sysconfig

    from conftest import compile_so

    ext = sysconfig.get_config_var("EXT_SUFFIX")
    root = tree_factory({
        "ft/__init__.py": "from .core import *\n", "ft/cli.py": "", "ft/errs.py": "",
        "ft/core.py": "from .errs import *\n__all__ = ['fast']\nfast = 1\n",
        "sp/__init__.py": "from ._lib import *\n", "sp/interp.py": "",
    })
    module = r"""
        #include <Python.h>
        static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "%s", NULL, -1, NULL};
        const char *volatile source = "%s.py";  /* Cython keeps the file it compiled, for tracebacks */
        PyMODINIT_FUNC PyInit_%s(void) {
            PyObject *m = PyModule_Create(&def);
            char name[16];  /* `from .errs import *`, by a name no string of the module holds whole */
            snprintf(name, sizeof name, "%%s.%%s", "ft", "errs");
            if (!PyImport_ImportModule(name)) return NULL;
            PyModule_AddObject(m, "__all__", Py_BuildValue("[s]", "fast"));
            PyModule_AddIntConstant(m, "fast", 1);
            return m;
        }
    """
    include = ["-I", sysconfig.get_paths()["include"]]
    compile_so(root / "ft", f"core{ext}", textwrap.dedent(module % ("core", "core", "core")), flags=include)
    compile_so(root / "sp", f"_lib{ext}", textwrap.dedent(module % ("_lib", "_lib", "_lib")).replace("ft", "sp"), flags=include)
    (root / "sp" / "errs.py").write_text("")
    assert keys(run([root]), "CU101") == ["ft.cli"]
    probe = "import ft, sp\nprint(ft.fast, hasattr(ft, 'cli'), hasattr(sp, 'interp'), hasattr(ft, 'errs'))\n"
    out = imported_for_real(root, probe)
    assert out == ["1", "False", "False", "True"]



def test_a_module_without_python_source_facts_adds_no_imports(tree_factory):
    """A package's own test folder gets no python_source facts (never API): the package model does
    not follow its imports although its import-time program exists (the model asks whether those
    facts exist without decoding them: direct_imports, ctx.has_fact)."""
    root = tree_factory({
        "pk/__init__.py": "from .tests import helpers\nfrom . import other\n",
        "pk/tests/__init__.py": "",
        "pk/tests/helpers.py": "import pk.sub\n",
        "pk/other.py": "import pk.extra\n",
        "pk/sub.py": "", "pk/extra.py": "", "pk/alone.py": "",
    })
    report = run([root])
    assert keys(report, "CU101") == ["pk.alone", "pk.sub"]


def test_a_call_effect_holds_the_state_its_own_init_gives_it():
    """Call effects are built without ``Effect.__init__`` (most effects are calls): the same
    state, key for key and in the same order, so that they compare, print and pickle alike."""
    import pickle

    from cuaudit.facts.import_time import Condition, Effect

    prog = parse_import_time(src('''
        import pkg
        pkg.setup("a", name, lextab="t", n=1)
        if flag:
            run()
        def f():
            g(x="y")
            h()
    '''))
    assert prog is not None
    calls = [e for e in prog.effects + prog.functions[0].effects if e.kind == "call"]
    cond = (Condition("flag", True, 3),)
    expected = [
        Effect("call", 2, (), callee="pkg.setup", args=("a", ""), kwargs=(("lextab", "t"),)),
        Effect("call", 4, cond, callee="run"),
        Effect("call", 6, (), callee="g", kwargs=(("x", "y"),)),
        Effect("call", 7, (), callee="h"),
    ]
    assert calls == expected
    assert [list(vars(e).items()) for e in calls] == [list(vars(e).items()) for e in expected]
    assert [pickle.dumps(e) for e in calls] == [pickle.dumps(e) for e in expected]

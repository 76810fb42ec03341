"""CU1xx submodule attribute traps, on packages and code built here."""

from __future__ import annotations

import sys
import textwrap

import pytest

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.facts.python_source import parse_python_source
from cuaudit.model import Applicability


def run(paths, **cfg):
    cfg.setdefault("select", ("CU1",))
    return audit([str(p) for p in paths], config=Config(cache=False, **cfg))


def by_code(report, code):
    return [f for f in report.findings if f.code == code]


def keys(report, code):
    return sorted(f.key for f in report.findings if f.code == code)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- the extractor ------------------------------------------------------------------------


def test_bindings_imports_and_all():
    f = parse_python_source(src("""
        import os.path
        import numpy as np
        from . import sub
        from .core import run as go
        from .stars import *
        try:
            from . import optional
        except ImportError:
            optional = None
        if TYPE_CHECKING:
            from . import typed_only
        X = 1
        def f(): import json
        class C: pass
        for name in ["float96", "float128"]:
            globals()[name] = 1
        __all__ = ["sub", "go"]
        del X
    """))
    names = f.bound_names()
    assert {"os", "np", "sub", "go", "optional", "f", "C", "float96", "float128"} <= names
    assert "typed_only" not in names and "json" not in names
    assert f.all_names == ("sub", "go")
    assert [i.module for i in f.star_imports] == ["stars"]
    assert ("X", 18) in f.deleted
    cond = {b.name: b.conditional for b in f.bindings}
    assert cond["optional"] is True and cond["sub"] is False
    json_imp = next(i for i in f.imports if i.module == "json")
    assert json_imp.scope == "f" and json_imp.conditional
    tc = next(i for i in f.imports if i.name == "typed_only")
    assert tc.type_checking and list(f.module_level_imports()).count(tc) == 0
    assert f.dynamic == ()


def test_getattr_patterns():
    f = parse_python_source(src("""
        _table = {"cublas": "x", "cusolver": "y"}
        _subs = ["fft", "linalg"]
        def __getattr__(name):
            if name == "jitify":
                return 1
            if name in ("curand", "cusparse"):
                return 2
            if name in _subs:
                return 3
            if name == "old":
                raise AttributeError("removed")
            match name:
                case "matched":
                    return 4
            return _table[name]
            raise AttributeError(name)
    """))
    g = f.getattr
    assert set(g.handled) == {"jitify", "curand", "cusparse", "fft", "linalg", "cublas", "cusolver", "matched"}
    assert g.raising == ("old",) and g.fallback == "AttributeError" and not g.generic


def test_getattr_generic_and_guarded_import_module():
    generic = parse_python_source("import importlib\ndef __getattr__(n):\n    return importlib.import_module(f'.{n}', __name__)\n")
    assert generic.getattr.generic
    guarded = parse_python_source(src("""
        import importlib
        submodules = ["a", "b"]
        def __getattr__(name):
            if name in submodules:
                return importlib.import_module(f"pkg.{name}")
            raise AttributeError(name)
    """))
    assert not guarded.getattr.generic and set(guarded.getattr.handled) == {"a", "b"}


def test_lazy_loader_attach():
    f = parse_python_source(src("""
        import lazy_loader as lazy
        __getattr__, __dir__, __all__ = lazy.attach(__name__, submodules=["filters", "io"], submod_attrs={"util": ["img_as_float"]})
    """))
    assert f.lazy.kind == "attach" and f.lazy.submodules == ("filters", "io")
    assert set(f.getattr.handled) == {"filters", "io", "img_as_float"}
    assert "__getattr__" in f.bound_names()


def test_chains_guards_and_shadowing():
    f = parse_python_source(src("""
        import cupy
        def f(cupy):
            return cupy.cuda.nccl
        try:
            cupy.cuda.nccl
        except (ImportError, AttributeError):
            pass
        ok = hasattr(cupy.cuda, "nccl")
        x = cupy.cuda.nccl.NcclCommunicator
    """))
    chains = {(c.line, c.guard, c.shadowed): c.attrs for c in f.chains if c.root == "cupy"}
    assert chains[(3, "", True)] == ("cuda", "nccl")
    assert chains[(5, "except", False)] == ("cuda", "nccl")
    assert chains[(8, "hasattr", False)] == ("cuda", "nccl")
    assert chains[(9, "", False)] == ("cuda", "nccl", "NcclCommunicator")


def test_a_function_shadows_a_name_it_stores_anywhere_in_its_body():
    # every place a function body stores a name, the parts no chain is looked for in included
    # (defaults and annotations of a nested def, an `if TYPE_CHECKING:` body, an except type,
    # a nested class's keywords); `global` takes it back
    stores = {
        "plain": "np = other",
        "tuple": "(a, [*np]) = pair",
        "loop": "for np in things: pass",
        "with": "with ctx() as (a, np): pass",
        "comprehension": "[0 for np in things]",
        "walrus": "(np := other)",
        "augmented": "np += 1",
        "annotated": "np: int = 1",
        "nested def": "def inner():\n        np = 1",
        "nested class": "class Inner:\n        np = 1",
        "default": "def inner(x=(np := 1)): pass",
        "annotation": "x: (np := int) = 1",
        "type checking": "if TYPE_CHECKING:\n        np = 1",
        "except type": "try: pass\n    except (np := Exception): pass",
        "class keyword": "class Inner(metaclass=(np := Meta)): pass",
        "lambda default": "f = lambda y=(np := 1): y",
    }
    for what, store in stores.items():
        for declared in ("", "if x:\n        global np\n    "):
            facts = parse_python_source(f"import numpy as np\ndef f():\n    {declared}{store}\n    return np.linalg.norm\n")
            chains = [c for c in facts.chains if c.attrs == ("linalg", "norm")]
            assert [c.shadowed for c in chains] == [not declared], (what, declared)
    # the signature of a def is evaluated where it is defined: it stores nothing in the def itself
    facts = parse_python_source("import numpy as np\ndef f(x=[0 for np in y]):\n    return np.linalg.norm\n")
    assert [c.shadowed for c in facts.chains if c.attrs == ("linalg", "norm")] == [False]
    # a lambda's body is its own scope: a chain in it is shadowed by its parameters only
    facts = parse_python_source("import numpy as np\nf = lambda np: np.linalg.norm\ng = lambda: np.linalg.norm\n")
    assert [c.shadowed for c in facts.chains if c.attrs == ("linalg", "norm")] == [True, False]


def test_syntax_error_is_a_fact_not_a_crash():
    f = parse_python_source("def broken(:\n")
    assert f.syntax_error is not None and f.syntax_error.line == 1
    assert f.bindings == () and f.chains == ()


def test_non_text_python_file_is_cu006(tree_factory):
    tree = tree_factory({"pkg/__init__.py": b"\xff\xfe\x00garbage\x00\xff", "pkg/a.py": "x = 1\n"})
    report = run([tree], select=("CU0", "CU1"))
    assert [f.code for f in report.findings] == ["CU006"]


# -- package side -----------------------------------------------------------------------------

PKG = {
    "pkg/__init__.py": src("""
        from . import bound
        from .helpers import thing
        from ._impl import *
        import os
        def __getattr__(name):
            if name == "lazy":
                from . import lazy
                return lazy
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    """),
    "pkg/bound.py": "import pkg.viaimport\n",
    "pkg/viaimport.py": "",
    "pkg/helpers.py": "thing = 1\n",
    "pkg/lazy.py": "",
    "pkg/missed.py": "",  # the CuPy nccl case
    "pkg/starred.py": "",
    "pkg/_impl.py": "__all__ = ['starred']\nstarred = 1\n",
    "pkg/_private.py": "",
    "pkg/tests/__init__.py": "",
    "pkg/sub/__init__.py": "from .inner import x\n",
    "pkg/sub/inner.py": "x = 1\n",
    "pkg/sub/plain.py": "",
    "pkg/sub/data/thing.py": "",  # a namespace folder inside a package: not API
    "nsroot/portion.py": "",  # a namespace package: cannot bind its portions
}


def test_package_side_findings(wheel_factory):
    whl = wheel_factory("pkg", "1.0", PKG)
    report = run([whl])
    assert keys(report, "CU102") == ["pkg.missed", "pkg.sub"]
    assert keys(report, "CU101") == ["pkg.sub.plain"]
    cu102 = by_code(report, "CU102")[0]
    assert cu102.location.member == "pkg/__init__.py" and cu102.location.line == 5
    assert "'lazy'" not in cu102.message or "serves" in cu102.message
    assert "lazy" in cu102.evidence["handled"]
    assert all(f.origin == "static" for f in report.findings)


def test_dynamic_namespace_stays_silent(wheel_factory):
    whl = wheel_factory("dyn", "1.0", {
        "dyn/__init__.py": "from ._c import *\nglobals().update(dict(a=1))\n",
        "dyn/_c.py": "", "dyn/sub.py": "",
    })
    assert run([whl]).findings == []


def test_extension_star_import_stays_silent(wheel_factory):
    whl = wheel_factory("ext", "1.0", {
        "ext/__init__.py": "from ._core import *\n",
        "ext/_core.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
        "ext/sub.py": "",
    })
    assert keys(run([whl]), "CU101") == []


def test_del_after_import_is_a_trap(wheel_factory):
    whl = wheel_factory("d", "1.0", {"d/__init__.py": "from . import gone\ndel gone\n", "d/gone.py": ""})
    report = run([whl])
    assert keys(report, "CU101") == ["d.gone"]
    assert "del gone" in by_code(report, "CU101")[0].message


def test_lazy_loader_tables(wheel_factory):
    whl = wheel_factory("lz", "1.0", {
        "lz/__init__.py": src("""
            import lazy_loader as lazy
            __getattr__, __dir__, __all__ = lazy.attach(__name__, submodules=["filters", "morphology"])
        """),
        "lz/__init__.pyi": "from . import filters\nfrom . import color\n",
        "lz/filters.py": "", "lz/color.py": "",
        "st/__init__.py": "import lazy_loader as lazy\n__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)\n",
        "st/io.py": "",
    })
    report = run([whl])
    assert keys(report, "CU103") == ["lz.color:stub-only", "lz.morphology:missing", "st:stub-missing"]
    # color is declared only by the stub: the runtime raises for it
    assert keys(report, "CU102") == ["lz.color", "st.io"] or keys(report, "CU102") == ["lz.color"]


def test_attach_stub_serves_what_the_stub_declares(wheel_factory):
    whl = wheel_factory("st", "1.0", {
        "st/__init__.py": "import lazy_loader as lazy\n__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)\n",
        "st/__init__.pyi": "from . import io\nfrom .util import helper\n",
        "st/io.py": "", "st/util.py": "helper = 1\n", "st/extra.py": "",
    })
    report = run([whl])
    # util is imported only once `helper` is first used: `st.util` raises before that
    assert keys(report, "CU102") == ["st.extra", "st.util"]
    assert keys(report, "CU103") == []


# -- code side -----------------------------------------------------------------------------------

USER = src("""
    import cupy
    import concurrent
    import os
    import xml as x

    def make(n, uid, rank):
        return cupy.cuda.nccl.NcclCommunicator(n, uid, rank)

    try:
        cupy.cuda.nccl
        HAVE_NCCL = True
    except AttributeError:
        HAVE_NCCL = False

    HAVE = hasattr(cupy.cuda, "nccl")
    pool = concurrent.futures.ThreadPoolExecutor()
    os.path.join("a", "b")
    cupy.cuda.cublas
    cupy.cuda.memory.alloc
    x.etree.ElementTree
""")

FAKE_CUPY = {
    "cupy/__init__.py": "from cupy import cuda\n",
    "cupy/cuda/__init__.py": src("""
        from cupy.cuda import memory
        def __getattr__(key):
            if key == 'cublas':
                from cupy_backends.cuda.libs import cublas
                return cublas
            raise AttributeError(key)
    """),
    "cupy/cuda/memory.py": "def alloc(): pass\n",
    "cupy/cuda/nccl.py": "class NcclCommunicator: pass\n",
}


def test_code_side_against_a_wheel_and_the_stdlib(tree_factory, wheel_factory):
    whl = wheel_factory("cupy", "1.0", FAKE_CUPY)
    tree = tree_factory({"app/main.py": USER})
    report = run([tree, whl])
    cu104 = [f for f in by_code(report, "CU104") if f.location.artifact.path == str(tree)]
    assert sorted((f.location.line, f.key) for f in cu104) == [(7, "cupy.cuda.nccl"), (16, "concurrent.futures"), (20, "xml.etree.ElementTree")]
    nccl = next(f for f in cu104 if f.key == "cupy.cuda.nccl")
    assert nccl.location.column == 12 and nccl.fix.applicability is Applicability.SAFE
    assert nccl.fix.edits[0].content == "import cupy.cuda.nccl\n" and nccl.fix.edits[0].start_line == 2
    xml = next(f for f in cu104 if f.key.startswith("xml"))
    assert xml.fix.applicability is Applicability.UNSAFE  # `import xml.etree...` binds `xml`, not `x`
    cu105 = by_code(report, "CU105")
    assert sorted((f.location.line, f.evidence["guard"]) for f in cu105) == [(9, "except"), (15, "hasattr")]


def test_fix_adds_the_import(cli, tree_factory, wheel_factory):
    whl = wheel_factory("cupy", "1.0", FAKE_CUPY)
    tree = tree_factory({"main.py": "import cupy\n\nc = cupy.cuda.nccl.NcclCommunicator()\n"})
    rc, out, _ = cli("check", "--isolated", "--no-cache", "--select", "CU104", "--fix", tree, whl)
    text = (tree / "main.py").read_text()
    assert text == "import cupy\nimport cupy.cuda.nccl\n\nc = cupy.cuda.nccl.NcclCommunicator()\n"
    report = run([tree, whl], select=("CU104",))
    assert [f for f in report.findings if f.location.artifact.path == str(tree)] == []


def test_imports_in_the_file_and_parent_closure_count(tree_factory):
    tree = tree_factory({"m.py": src("""
        import concurrent
        import email
        def later():
            import concurrent.futures
        concurrent.futures.Future
        import logging
        logging.handlers
        import json
        json.decoder.JSONDecoder
    """)})
    report = run([tree])
    # concurrent.futures is imported in the file; json imports json.decoder itself
    assert keys(report, "CU104") == ["logging.handlers"]


def test_environment_resolution(tmp_path, wheel_factory):
    """The installed distributions of an environment resolve user code (cuaudit env / env=)."""
    site = tmp_path / "site"
    import zipfile

    whl = wheel_factory("cupy", "1.0", FAKE_CUPY)
    zipfile.ZipFile(whl).extractall(site)
    user = tmp_path / "u.py"
    user.write_text("import cupy\ncupy.cuda.nccl.NcclCommunicator\n")
    from cuaudit.inputs.environment import find_distributions

    dists = find_distributions([str(site)])
    report = audit([str(user), *dists], config=Config(cache=False, select=("CU104",)))
    assert [(f.location.member, f.key) for f in report.findings] == [("u.py", "cupy.cuda.nccl")]


# -- the probe ----------------------------------------------------------------------------------


def test_probe_confirms_package_findings(wheel_factory):
    whl = wheel_factory("pkg", "1.0", PKG)
    report = run([whl], probe=True)
    got = {f.key: f for f in report.findings if f.code in ("CU101", "CU102")}
    assert set(got) == {"pkg.missed", "pkg.sub", "pkg.sub.plain"}
    assert all(f.origin == "probe" and f.evidence["probe"]["status"] == "trap" for f in got.values())
    assert "Confirmed by --probe" in got["pkg.missed"].message
    assert report.probes and all("-I -S" in p.command for p in report.probes)


def test_probe_overrules_a_wrong_static_verdict(wheel_factory):
    # imported at runtime by exec'd text: invisible statically (a computed import_module name is
    # seen, and makes the model abstain for the package: issue 12)
    whl = wheel_factory("tricky", "1.0", {
        "tricky/__init__.py": "from . import helper\n",
        "tricky/helper.py": "exec('import tricky.late')\n",
        "tricky/late.py": "",
    })
    assert keys(run([whl]), "CU101") == ["tricky.late"]
    assert keys(run([whl], probe=True), "CU101") == []


def test_probe_uses_a_clean_interpreter():
    """importlib.util and collections.abc are imported by site start-up: the probe must not be fooled."""
    from cuaudit.analysis.module_tree import ModuleUniverse, stdlib_dir
    from cuaudit.probe.imports import probe_submodules

    pairs = {"importlib": ["util", "machinery"], "concurrent": ["futures"], "xml": ["etree"], "os": ["path"], "collections": ["abc"], "email": ["mime"]}
    results, runs = probe_submodules(sys.executable, [], pairs, timeout=60)
    uni = ModuleUniverse(stdlib_dir())
    for parent, subs in pairs.items():
        for sub in subs:
            static = uni.reach(parent, sub, uni.closure([parent]))
            assert static.is_trap == (results[(parent, sub)].status == "trap"), (parent, sub, static, results[(parent, sub)])
    assert results[("importlib", "util")].status == "trap"
    assert results[("os", "path")].status == "ok"
    assert len(runs) == len(pairs)


def test_probe_timeout_is_reported(tmp_path):
    from cuaudit.probe.imports import probe_submodules

    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "__init__.py").write_text("while True: pass\n")
    results, runs = probe_submodules(sys.executable, [str(tmp_path)], {"slow": ["x"]}, timeout=1)
    assert results[("slow", "x")].status == "timeout" and "timed out" in runs[0].outcome


def test_probe_asks_a_module_subclass_through_its_class_getattr(tmp_path):
    """cryptography's serialization module is replaced by a `_ModuleWithDeprecations` whose class
    `__getattr__` forwards to the original (so `serialization.base` works), Pygments' lexers by an
    `_automodule`: the instance's `__dict__` shows no `__getattr__`, yet attribute access uses it."""
    from cuaudit.probe.imports import probe_submodules

    (tmp_path / "wrapped").mkdir()
    (tmp_path / "wrapped" / "__init__.py").write_text(
        "import sys, types\nfrom . import base\n"
        "class _Wrapper(types.ModuleType):\n"
        "    def __init__(self, module):\n        super().__init__(module.__name__)\n        self.__dict__['_module'] = module\n"
        "    def __getattr__(self, name):\n        return getattr(self._module, name)\n"
        "sys.modules[__name__] = _Wrapper(sys.modules[__name__])\n")
    (tmp_path / "wrapped" / "base.py").write_text("")
    (tmp_path / "wrapped" / "never.py").write_text("")
    results, _ = probe_submodules(sys.executable, [str(tmp_path)], {"wrapped": ["base", "never"]}, timeout=60)
    assert results[("wrapped", "base")].status == "ok"
    assert results[("wrapped", "never")].status == "trap"


def test_rule_docs_have_all_sections():
    from cuaudit.rules import DOC_SECTIONS, get

    for code in ("CU101", "CU102", "CU103", "CU104", "CU105"):
        doc = get(code).doc()
        # the five fixed sections; Options and References appear where a rule declares them
        assert all(doc.sections.get(s) for s in DOC_SECTIONS[:5]), code


def test_probe_confirms_code_side_findings(tree_factory, wheel_factory):
    whl = wheel_factory("tricky", "1.0", {
        "tricky/__init__.py": "from . import helper\n",
        "tricky/helper.py": "exec('import tricky.late')\n",
        "tricky/late.py": "", "tricky/never.py": "",
    })
    tree = tree_factory({"app.py": "import concurrent\nimport tricky\nconcurrent.futures.Future\ntricky.late\ntricky.never\n"})
    static = run([tree, whl], select=("CU104",))
    assert sorted(f.key for f in static.findings) == ["concurrent.futures", "tricky.late", "tricky.never"]
    probed = run([tree, whl], select=("CU104",), probe=True)
    got = {f.key: f for f in probed.findings}
    assert sorted(got) == ["concurrent.futures", "tricky.never"]  # tricky.late exists at run time
    assert all(f.origin == "probe" and "Confirmed by --probe" in f.message for f in got.values())


def test_annotations_and_type_checking_blocks_are_not_runtime_accesses():
    lazy = parse_python_source(src("""
        from __future__ import annotations
        import concurrent
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            x = concurrent.futures.Future
        y: concurrent.futures.Future = None
        def f(a: concurrent.futures.Future) -> concurrent.futures.Future:
            return a
    """))
    assert [c for c in lazy.chains if c.root == "concurrent"] == []
    eager = parse_python_source("import concurrent\ny: concurrent.futures.Future = None\n")
    assert [c.attrs for c in eager.chains] == [("futures", "Future")]


def test_literal_dunder_import_counts_as_an_import(tree_factory):
    # pip's vendored pkg_resources imports its packaging submodules with __import__('...')
    tree = tree_factory({"m.py": "import concurrent\n__import__('concurrent.futures')\nconcurrent.futures.Future\n"})
    assert run([tree]).findings == []


def test_fix_adds_one_import_for_many_accesses_and_keeps_indentation(cli, tree_factory):
    tree = tree_factory({"m.py": src("""
        def f():
            import concurrent
            a = concurrent.futures.Future
            b = concurrent.futures.wait
            return a, b
    """)})
    rc, out, _ = cli("check", "--isolated", "--no-cache", "--select", "CU104", "--fix", tree)
    assert (tree / "m.py").read_text() == src("""
        def f():
            import concurrent
            import concurrent.futures
            a = concurrent.futures.Future
            b = concurrent.futures.wait
            return a, b
    """)
    assert rc == 0


def test_fix_on_a_last_line_without_newline(cli, tree_factory):
    tree = tree_factory({"m.py": "def f():\n    return concurrent.futures.Future\nimport concurrent", "n.py": "import xml; xml.etree\n"})
    cli("check", "--isolated", "--no-cache", "--select", "CU104", "--fix", tree)
    assert (tree / "m.py").read_text() == "def f():\n    return concurrent.futures.Future\nimport concurrent\nimport concurrent.futures"
    # the access is on the import's own line: an import after it would come too late
    assert (tree / "n.py").read_text() == "import xml; xml.etree\n"


def test_broad_handler_is_error_handling_not_an_availability_check(tree_factory):
    tree = tree_factory({"m.py": "import concurrent\ntry:\n    concurrent.futures.Future\nexcept Exception:\n    pass\n"})
    report = run([tree])
    assert [(f.code, f.location.line) for f in report.findings] == [("CU104", 3)]


def test_allow_list_for_submodules_meant_to_be_imported(wheel_factory):
    whl = wheel_factory("pkg", "1.0", PKG)
    report = audit([str(whl)], config=Config(cache=False, select=("CU1",), allow={"submodule-traps": ("pkg.sub*",)}))
    assert keys(report, "CU101") + keys(report, "CU102") == ["pkg.missed"]


def test_a_module_of_an_artifact_added_later_exists():
    """The universe remembers the names no module answers (`from pkg import function` asks
    about many); an artifact added afterwards may provide one of them, and then
    the name exists."""
    from types import SimpleNamespace

    from cuaudit.analysis.module_tree import ModuleUniverse
    from cuaudit.model import ArtifactKind

    def tree(*paths: str) -> SimpleNamespace:
        return SimpleNamespace(ref=SimpleNamespace(kind=ArtifactKind.TREE), members=[SimpleNamespace(path=p) for p in paths])

    uni = ModuleUniverse(None)
    uni.add_artifact(tree("a/__init__.py"), lambda *_: None)
    assert uni.exists("a") and not uni.exists("b.sub") and not uni.exists("b.sub")
    uni.add_artifact(tree("b/__init__.py", "b/sub.py"), lambda *_: None)
    assert uni.exists("b.sub") and uni.exists("b") and not uni.exists("b.other")


# -- one package's failure does not take the family's other findings ---------------------------


def test_a_failure_on_one_package_or_file_is_cu011_there_and_the_other_traps_stand(tmp_path, monkeypatch):
    """A bug met while judging one package (its ``reach``) or one file (its chains) used to fail the
    whole rule: one CU011 for the audit and no CU101/CU104 at all (the fifteenth session's fuzz met
    one).  Now it is one CU011 on that package's or that file's member, and the others are judged."""
    import cuaudit.analysis.module_tree as module_tree
    import cuaudit.rules.imports as imports

    for pkg in ("bad", "good"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("x = 1\n")
        (tmp_path / pkg / "sub.py").write_text("y = 2\n")
    (tmp_path / "user.py").write_text("import good\ngood.sub.y\n")
    (tmp_path / "broken.py").write_text("import good\ngood.sub.y\n")
    reach, file_traps = module_tree.ModuleUniverse.reach, imports._file_traps

    def failing_reach(self, parent, *a, **k):  # type: ignore[no-untyped-def]
        if parent == "bad":
            raise KeyError("planted")
        return reach(self, parent, *a, **k)

    def failing_file(uni, art, path, *a, **k):  # type: ignore[no-untyped-def]
        if path == "broken.py":
            raise ValueError("planted")
        return file_traps(uni, art, path, *a, **k)

    monkeypatch.setattr(module_tree.ModuleUniverse, "reach", failing_reach)
    monkeypatch.setattr(imports, "_file_traps", failing_file)
    report = run([tmp_path], jobs=1)
    internal = sorted((f.location.member, f.message) for f in by_code(report, "CU011"))
    assert [m for m, _ in internal] == ["bad/__init__.py", "broken.py"], internal
    assert "failed on the submodules of bad: KeyError: 'planted' (at test_imports.py:" in internal[0][1], internal
    assert "failed on the attribute chains of this file: ValueError: planted (at test_imports.py:" in internal[1][1], internal
    assert keys(report, "CU101") == ["good.sub"]
    assert [f.location.member for f in by_code(report, "CU104")] == ["user.py"]
    # with --probe, the trap the model could not judge is still found, by importing the package
    probed = run([tmp_path], jobs=1, probe=True)
    found = {f.key: f for f in by_code(probed, "CU101")}
    assert sorted(found) == ["bad.sub", "good.sub"]
    assert found["bad.sub"].origin == "probe" and "static model failed" in found["bad.sub"].message
    assert [f.location.member for f in by_code(probed, "CU011")] == ["bad/__init__.py", "broken.py"]

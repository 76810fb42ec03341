"""Facts extracted only where they are read (``Extractor.on_demand``), and the exact shortcuts
that spare a parse: the format check trusting a valid ``__pycache__`` header of cuaudit's own
interpreter, and promotion_source skipping text that names neither numpy nor cupy."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import struct
import sys
from pathlib import Path

import pytest
from conftest import make_installed, make_tree

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.facts import MemberReader
from cuaudit.facts.format_check import compiles_by_its_bytecode
from cuaudit.facts.promotion import PromotionFacts, PromotionSourceExtractor, promotion_facts
from cuaudit.formats import python as python_format
from cuaudit.formats.python import parse_python
from cuaudit.inputs import resolve
from cuaudit.inputs.environment import InstalledDistribution
from cuaudit.model import InputError

#: a package whose __init__ imports one module; `_unread` is imported by nothing and is no public submodule
PACKAGE = {
    "pkg/__init__.py": "from . import core\n",
    "pkg/core.py": "import os\n\ndef f():\n    return os.sep\n",
    "pkg/extra.py": "X = 1\n",
    "pkg/_unread.py": "def g(x):\n    return [y for y in x]\n" * 50,
}


def _installed(tmp_path: Path, files: dict[str, str], *, compiled: bool = True, sub: str = "site") -> InstalledDistribution:
    dist = make_installed(tmp_path / sub, "pkg", files)
    if compiled:  # what an installer does (pip compiles every module it installs, where it can)
        for rel in files:
            if rel.endswith(".py"):
                try:
                    _compile(tmp_path / sub / rel)
                except py_compile.PyCompileError:
                    pass
    return dist


def _compile(source: Path, mode: py_compile.PycInvalidationMode = py_compile.PycInvalidationMode.TIMESTAMP) -> Path:
    return Path(py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), doraise=True,
                                   invalidation_mode=mode))


@pytest.fixture
def parsed(monkeypatch) -> list[str]:
    """The paths every Python parse of this process was asked for (extraction runs in process with jobs=1)."""
    seen: list[str] = []

    def spy(data: bytes, path: str):
        seen.append(path)
        return parse_python(data, path)

    monkeypatch.setattr(python_format, "parse_python", spy)
    return seen


def _reader(art, path: str) -> MemberReader:
    return MemberReader(art, art.member(path))


# -- facts read on demand ---------------------------------------------------------------------


def test_a_module_no_rule_reads_is_never_parsed(tmp_path, parsed):
    dist = _installed(tmp_path, PACKAGE)
    report = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    names = {os.path.relpath(p, dist.ref.path) if os.path.isabs(p) else p for p in parsed}
    # the package model read pkg's program and the module it imports; nothing asked for _unread
    assert "pkg/__init__.py" in names and "pkg/core.py" in names
    assert "pkg/_unread.py" not in names
    assert report.stats["facts_extracted"] > 0


#: where the format check takes a source no pass parsed without building its tree (formats.python.compiles)
WITHOUT_TREE = sys.version_info < (3, 12)


def test_without_bytecode_the_format_check_reads_every_module_and_builds_no_tree_no_pass_needs(tmp_path, parsed, monkeypatch):
    checked: list[str] = []
    real = python_format.compiles

    def spy(text: str, path: str = "<source>") -> bool:
        checked.append(path)
        return real(text, path)

    monkeypatch.setattr(python_format, "compiles", spy)
    dist = _installed(tmp_path, PACKAGE, compiled=False)
    audit([dist], config=Config(cache=False, jobs=1), command="explain")
    # the format check itself (CU006 must be found wherever it is); where exact, without a tree
    assert "pkg/_unread.py" in checked
    assert ("pkg/_unread.py" not in parsed) == WITHOUT_TREE
    # a module the passes parsed is checked by their parse: neither parsed twice nor checked again
    assert "pkg/core.py" in parsed and "pkg/core.py" not in checked


def test_without_bytecode_each_module_is_parsed_once_and_every_syntax_error_found(tmp_path, parsed):
    # an environment installed without __pycache__ files (uv's default): the format check of an installed
    # source waits for the passes read on demand and shares their parse (Extractor.deferred, comes_along);
    # what no pass parsed is checked once the rules have run.  Before, every module the passes read was
    # parsed twice (the accuracy-venv without bytecode: 42 -> 31 s cold on 2 cores).
    files = {**PACKAGE, "pkg/core_broken.py": "def (:\n", "pkg/_unread_broken.py": "x = (\n"}
    files["pkg/__init__.py"] = "from . import core\ntry:\n    from . import core_broken\nexcept SyntaxError:\n    pass\n"
    dist = _installed(tmp_path, files, compiled=False)
    report = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    seen = _relative(dist, parsed)
    # once each (the module that does not parse is read again for its bindings, in a batch of their own)
    assert all(seen.count(p) == 1 for p in seen if p != "pkg/core_broken.py") and seen.count("pkg/core_broken.py") <= 2
    # what no pass parsed: checked without a tree where it compiles (and that is exact), else parsed
    assert {"pkg/core.py", "pkg/_unread_broken.py"} <= set(seen)
    assert ("pkg/_unread.py" in seen) != WITHOUT_TREE
    broken = sorted(f.location.member for f in report.findings if f.code == "CU006")
    assert broken == ["pkg/_unread_broken.py", "pkg/core_broken.py"]
    # the same findings as the format check alone, and as an environment with bytecode
    alone = audit([_installed(tmp_path, files, compiled=False, sub="alone")],
                  config=Config(cache=False, jobs=1, select=("CU0",)), command="explain")
    assert sorted(f.location.member for f in alone.findings if f.code == "CU006") == broken
    compiled = audit([_installed(tmp_path, files, compiled=True, sub="compiled")], config=Config(cache=False, jobs=1),
                     command="explain")
    assert sorted(f.location.member for f in compiled.findings if f.code == "CU006") == broken


def _fresh(dist: InstalledDistribution) -> InstalledDistribution:
    """The same distribution listed again, as a new process lists it."""
    return InstalledDistribution(None, dist.ref.name, dist.ref.version, dist.meta_dir)


def test_on_demand_facts_are_cached_and_a_second_audit_extracts_nothing(tmp_path):
    dist = _installed(tmp_path, {**PACKAGE, "pkg/broken.py": "def (:\n"})
    tree = Path(dist.ref.path)
    config = Config(cache=True, cache_dir=str(tmp_path / "cache"), jobs=1)
    first = audit([_fresh(dist)], config=config, command="explain")  # explain keeps no snapshot
    assert first.stats["facts_extracted"] > 0
    again = audit([_fresh(dist)], config=config, command="explain")
    assert again.stats["facts_extracted"] == 0
    assert again.stats["facts_cached"] == first.stats["facts_extracted"] + first.stats["facts_cached"]
    assert [f.fingerprint() for f in again.findings] == [f.fingerprint() for f in first.findings]
    assert "CU006" in {f.code for f in again.findings}
    # one module changed: only what is read of it is extracted again, and its new content is what counts
    (tree / "pkg" / "core.py").write_text("import os\nimport json\n")
    third = audit([_fresh(dist)], config=config, command="explain")
    assert 0 < third.stats["facts_extracted"] <= 6
    uncached = audit([_fresh(dist)], config=Config(cache=False, jobs=1), command="explain")
    assert [f.fingerprint() for f in third.findings] == [f.fingerprint() for f in uncached.findings]


def test_a_batch_in_the_workers_gives_the_facts_one_by_one_reads_give(tmp_path):
    from cuaudit.engine import gather

    files = {f"pkg/m{i}.py": f"import os\nfrom . import m{(i + 1) % 90}\nX{i} = os.sep\n" for i in range(90)}
    dist = _installed(tmp_path, {"pkg/__init__.py": "from . import m0\n", **files}, compiled=False)
    names = ("import_time", "python_source", "module_imports")
    serial = gather([_fresh(dist)], config=Config(cache=False, jobs=1), extractors=names)
    one_by_one = {k: serial.extraction.facts.get(k) for k in sorted(serial.extraction.facts.pending)}
    batch = gather([_fresh(dist)], config=Config(cache=False, jobs=2), extractors=names)
    facts = batch.extraction.facts
    facts.prefetch(sorted(facts.pending))
    assert not facts.pending and batch.extraction.extracted == len(one_by_one) > 200
    assert {k: facts.get(k) for k in one_by_one} == one_by_one


def test_the_code_under_audit_is_extracted_up_front_with_its_one_parse(tmp_path):
    from cuaudit.engine import gather

    tree = make_tree(tmp_path / "t", PACKAGE)
    got = gather([str(tree)], config=Config(cache=False, jobs=1), extractors=("format", "import_time", "python_source"))
    assert not got.extraction.facts.pending
    assert dict.get(got.extraction.facts, (0, "pkg/_unread.py", "import_time")) is not None


def test_module_imports_come_along_with_the_program_of_their_member(tmp_path):
    from cuaudit.engine import gather

    got = gather([_installed(tmp_path, PACKAGE)], config=Config(cache=False, jobs=1), extractors=("import_time", "module_imports"))
    facts = got.extraction.facts
    facts.get((0, "pkg/core.py", "import_time"))
    assert (0, "pkg/core.py", "module_imports") not in facts.pending  # the same parse gave it
    assert (0, "pkg/extra.py", "module_imports") in facts.pending  # nothing read extra.py
    assert got.extraction.extracted == 2


# -- the format check and bytecode -------------------------------------------------------------


def test_a_valid_timestamp_pyc_of_this_interpreter_spares_the_parse(tmp_path):
    dist = _installed(tmp_path, {"pkg/__init__.py": "x = 1\n"})
    assert compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))


def test_a_checked_hash_pyc_counts_and_an_unchecked_one_does_not(tmp_path):
    dist = _installed(tmp_path, {"pkg/__init__.py": "x = 1\n", "pkg/b.py": "y = 2\n"}, compiled=False)
    site = Path(dist.ref.path)
    _compile(site / "pkg/__init__.py", py_compile.PycInvalidationMode.CHECKED_HASH)
    _compile(site / "pkg/b.py", py_compile.PycInvalidationMode.UNCHECKED_HASH)
    assert compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))
    assert not compiles_by_its_bytecode(_reader(dist, "pkg/b.py"))
    (site / "pkg/__init__.py").write_text("x = 2\n")  # same size, new bytes: the hash no longer matches
    assert not compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))


def _header(pyc: Path, **fields: int) -> None:
    head = bytearray(pyc.read_bytes())
    for offset, value in fields.items():
        struct.pack_into("<I", head, {"flags": 4, "mtime": 8, "size": 12}[offset], value & 0xFFFFFFFF)
    pyc.write_bytes(bytes(head))


def test_any_doubt_about_the_pyc_means_a_parse(tmp_path):
    dist = _installed(tmp_path, {"pkg/__init__.py": "x = 1\n"})
    site = Path(dist.ref.path)
    pyc = Path(importlib.util.cache_from_source(str(site / "pkg/__init__.py")))
    st = os.stat(site / "pkg/__init__.py")
    good = pyc.read_bytes()
    for damage in (lambda: _header(pyc, mtime=int(st.st_mtime) + 1), lambda: _header(pyc, size=st.st_size + 1),
                   lambda: _header(pyc, flags=4), lambda: pyc.write_bytes(good[:12]),
                   lambda: pyc.write_bytes(b"\0\0\0\0" + good[4:]), lambda: pyc.unlink()):
        pyc.write_bytes(good)
        assert compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))
        damage()
        assert not compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))
    # another interpreter's bytecode says nothing about this one's parser
    other = pyc.with_name(pyc.name.replace(sys.implementation.cache_tag, "cpython-299"))
    other.write_bytes(good)
    assert not compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))


def test_a_fifo_named_like_the_pyc_is_a_doubt_not_a_hang(tmp_path):
    dist = _installed(tmp_path, {"pkg/__init__.py": "x = 1\n"})
    site = Path(dist.ref.path)
    pyc = Path(importlib.util.cache_from_source(str(site / "pkg/__init__.py")))
    pyc.unlink()
    os.mkfifo(pyc)  # a plain open() would wait for a writer forever
    assert not compiles_by_its_bytecode(_reader(dist, "pkg/__init__.py"))


def test_only_installed_sources_are_trusted_by_their_bytecode(tmp_path):
    tree = make_tree(tmp_path / "t", {"pkg/__init__.py": "x = 1\n"})
    _compile(tree / "pkg/__init__.py")
    [art] = resolve([str(tree)])
    assert not compiles_by_its_bytecode(_reader(art, "pkg/__init__.py"))


def test_a_stale_or_forged_pyc_never_hides_a_syntax_error(tmp_path):
    dist = _installed(tmp_path, {"pkg/__init__.py": "x = 1\n", "pkg/forged.py": "y = 2\n"})
    site = Path(dist.ref.path)
    # stale: compiled before the source was broken (a new size and mtime)
    (site / "pkg/__init__.py").write_text("def (:\n    pass\n")
    os.utime(site / "pkg/__init__.py", (1_000_000_000, 1_000_000_000))
    # forged: the header names the broken source's mtime, but not its size
    (site / "pkg/forged.py").write_text("class :\n")
    st = os.stat(site / "pkg/forged.py")
    _header(Path(importlib.util.cache_from_source(str(site / "pkg/forged.py"))), mtime=int(st.st_mtime), size=st.st_size + 3)
    report = audit([dist], config=Config(cache=False, jobs=1, select=("CU0",)), command="explain")
    assert sorted((f.code, f.location.member) for f in report.findings) == [("CU006", "pkg/__init__.py"), ("CU006", "pkg/forged.py")]


# -- the format check without a tree (formats.python.compiles) ------------------------------------


def _ast_parses(text: str) -> bool:
    import ast

    try:
        ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


#: the constructs a tree nests by, each wrapped around an attribute chain of N levels: those where
#: ``ast`` builds a level the compiler's walk does not have (a keyword, a comprehension, an except
#: clause, a lambda's arguments) make the tree deeper for ``ast`` than for ``symtable``
_NESTINGS = {
    "attribute": lambda n: "x = a" + ".b" * n + "\n",
    "sum": lambda n: "x = 1" + "+1" * n + "\n",
    "unary": lambda n: "x = " + "-" * n + "1\n",
    "not": lambda n: "x = " + "not " * n + "y\n",
    "ifexp": lambda n: "x = " + "a if b else " * n + "c\n",
    "elif": lambda n: "if a:\n    pass\n" + "elif a:\n    pass\n" * n,
    "keywords": lambda n: "z = " + "f(a=" * 190 + "x" + ".b" * n + ")" * 190 + "\n",
    "comprehensions": lambda n: "z = " + "[y for y in " * 190 + "x" + ".b" * n + "]" * 190 + "\n",
    "lambda defaults": lambda n: "z = " + "lambda a=" * 700 + "x" + ".b" * n + ": 0" * 700 + "\n",
    "excepts": lambda n: "".join(" " * (2 * i) + "try:\n" + " " * (2 * i + 1) + "pass\n" + " " * (2 * i) + "except E:\n"
                                 for i in range(47)) + " " * 94 + "z = a" + ".b" * n + "\n",
    "match": lambda n: "match x:\n case " + "C(k=" * 190 + "a" + ".b" * n + ")" * 190 + ":\n  pass\n",
}


def _frames() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


@pytest.mark.parametrize("kind", sorted(_NESTINGS))
def test_what_compiles_takes_ast_parses_at_every_depth(kind):
    """True from the check without a tree is final: at and past its own bound, and around the depth
    where ``ast.parse`` stops, nothing it takes fails ``ast.parse``.  (On 3.12 and later it takes
    nothing: there ``symtable`` goes one or two levels deeper than ``ast``, and ``ast`` up to 750
    deeper than ``symtable`` on a tree of keywords and lambda defaults.)"""
    form = _NESTINGS[kind]

    def deepest(accepts, hi: int) -> int:
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if accepts(form(mid)) else (lo, mid - 1)
        return lo

    ast_limit = deepest(_ast_parses, 12_000)
    check_limit = deepest(python_format.compiles, 12_000)
    for depth in {0, 10, check_limit, check_limit + 1, check_limit + 2, ast_limit - 1, ast_limit, ast_limit + 1,
                  ast_limit + 200, 11_000}:
        if depth >= 0 and python_format.compiles(form(depth)):
            assert _ast_parses(form(depth)), (kind, depth)
    if WITHOUT_TREE:
        assert python_format.compiles(form(10)) and check_limit > 100  # nesting as real code nests is taken
        # and under a recursion limit a library user lowered, where ast.parse's bound is lower too
        low = sys.getrecursionlimit()
        try:
            sys.setrecursionlimit(_frames() + 500)
            ast_low, check_low = deepest(_ast_parses, 12_000), deepest(python_format.compiles, 12_000)
            for depth in {check_low, check_low + 1, ast_low - 1, ast_low, ast_low + 1}:
                if python_format.compiles(form(depth)):
                    assert _ast_parses(form(depth)), (kind, "low limit", depth)
        finally:
            sys.setrecursionlimit(low)
    else:
        assert not python_format.compiles(form(0))


@pytest.mark.parametrize("text, parses", [
    ("x = 1\n", True),
    ("def (:\n", False),
    ("x = (\n", False),
    ("x = 1\0\n", False),
    ("def f(a, a):\n    pass\n", True),  # the scopes refuse it, the grammar takes it: a parse decides
    ("nonlocal x\n", True),
    ("async def f():\n    await g()\n", True),
    ("await g()\n", True),
    ("from __future__ import braces\n", True),
    ("x: int = 1\nmatch x:\n    case 1:\n        pass\n", True),
])
def test_the_check_without_a_tree_and_the_parse_give_one_verdict(tmp_path, text, parses):
    from cuaudit.formats.python import parse_python_text

    [art] = resolve([str(make_tree(tmp_path, {"m.py": text}))])
    reader, parsed_reader = _reader(art, "m.py"), _reader(art, "m.py")
    error = reader.python_error()
    assert (error is None) == parses == parsed_reader.python().ok
    if error is not None:
        assert error.message == parsed_reader.python().error.message
    # a tree only to say why, or where the check without one is not exact
    built = "python" in reader.__dict__.get("_formats", {})
    assert built == (error is not None or not python_format.compiles(text))
    assert python_format.compiles("x = 1\n") == WITHOUT_TREE
    assert parse_python_text(text).ok == parses


def test_the_check_without_a_tree_agrees_with_the_parse_on_every_stdlib_module():
    import sysconfig

    import warnings

    root = Path(sysconfig.get_paths()["stdlib"])
    checked = taken = 0
    for path in sorted(root.rglob("*.py"))[:3000]:
        data = path.read_bytes()
        try:
            text = python_format.decode_python(data, str(path))
        except InputError:
            continue
        with warnings.catch_warnings():  # the stdlib's tests hold invalid escapes on purpose (as the CLI, ignored)
            warnings.simplefilter("ignore")
            module = python_format.parse_python_text(text, str(path))
            taken_here = python_format.compiles(text, str(path))
        if taken_here:
            assert module.ok, path
            taken += 1
        checked += 1
    assert checked > 500
    # the stdlib's test suite keeps sources that do not parse on purpose: the rest is taken
    assert (taken > checked * 0.95) == WITHOUT_TREE


def test_the_format_check_comes_after_the_passes_that_parse_and_shares_their_parse(tmp_path, parsed, monkeypatch):
    from cuaudit.workers import extract_group

    checked: list[str] = []
    real = python_format.compiles
    monkeypatch.setattr(python_format, "compiles", lambda text, path="<source>": checked.append(path) or real(text, path))
    text = "import numpy as np\n\ndef f(a):\n    return a.astype(np.float32)\n"
    [art] = resolve([str(make_tree(tmp_path, {"m.py": text, "n.py": "x = 1\n"}))])
    # asked first, it runs last: promotion_source parses m.py, and the check shares that parse
    rows = extract_group(art, [(art.member("m.py"), ("format", "promotion_source")), (art.member("n.py"), ("format",))])
    assert [(p, n, ok) for p, n, ok, _ in rows] == [("m.py", "format", True), ("m.py", "promotion_source", True),
                                                    ("n.py", "format", True)]  # rows in the order asked
    assert [os.path.basename(p) for p in checked] == ["n.py"]
    assert [os.path.basename(p) for p in parsed] == (["m.py"] if WITHOUT_TREE else ["m.py", "n.py"])
    assert rows[1][3] != PromotionFacts()  # promotion_source did parse it


# -- promotion_source without a parse ------------------------------------------------------------


def test_promotion_facts_of_text_naming_neither_library_are_empty_without_a_parse(tmp_path, parsed):
    tree = make_tree(tmp_path / "t", {"a.py": "import os\nx = os.sep\n", "b.py": "import numpy as np\nnp.can_cast(4, np.uint8)\n"})
    [art] = resolve([str(tree)])
    ex = PromotionSourceExtractor()
    assert ex.extract(_reader(art, "a.py")) == PromotionFacts() and parsed == []
    got = ex.extract(_reader(art, "b.py"))
    assert got == promotion_facts(parse_python((tree / "b.py").read_bytes(), "b.py")) and got.can_cast
    assert parsed == ["b.py"]


def test_the_promotion_prefilter_reads_the_decoded_text_not_the_bytes(tmp_path):
    # UTF-7 spells "numpy" without its bytes: the prefilter must not call it empty
    encoded = b"# -*- coding: utf-7 -*-\nimport +AG4AdQBtAHAAeQ- as np\nok = np.can_cast(4, np.uint8)\n"
    tree = make_tree(tmp_path / "t", {"u7.py": encoded, "bad.py": b"x = '\xff'\n"})
    [art] = resolve([str(tree)])
    assert b"numpy" not in encoded
    got = PromotionSourceExtractor().extract(_reader(art, "u7.py"))
    assert got == promotion_facts(parse_python(encoded, "u7.py")) and got.imports_numpy
    with pytest.raises(InputError) as err:  # undecodable: the same CU006 the parse raises
        PromotionSourceExtractor().extract(_reader(art, "bad.py"))
    assert err.value.code == "CU006"


# -- one parse per member: promotion_source shares the parse of the program -------------------------

#: modules naming numpy or cupy; `notes` names numpy in a comment only, `tests/` the rules never read
NUMERIC = {
    "pkg/__init__.py": "from . import core, kernels\n",
    "pkg/core.py": "import numpy as np\n\nX = np.uint8(300)\nok = np.can_cast(4, np.uint8)\n",
    "pkg/kernels.py": "import cupy\n\n@cupy.fuse()\ndef k(x):\n    return x + 1\n",
    "pkg/notes.py": "# numpy is mentioned here, never imported\nY = 1\n",
    "pkg/tests/test_core.py": "import numpy as np\n\nassert np.can_cast(1, np.uint8)\n",
}


def _relative(dist: InstalledDistribution, paths: list[str]) -> list[str]:
    return [os.path.relpath(p, dist.ref.path) if os.path.isabs(p) else p for p in paths]


def test_promotion_facts_come_along_with_a_program_and_equal_their_own_extraction(tmp_path, parsed):
    from cuaudit.engine import gather

    names = ("import_time", "module_imports", "promotion_source")
    dist = _installed(tmp_path, NUMERIC)
    shared = gather([dist], config=Config(cache=False, jobs=1), extractors=names).extraction.facts
    for path in ("pkg/core.py", "pkg/kernels.py", "pkg/tests/test_core.py"):
        shared.get((0, path, "import_time"))
    assert (0, "pkg/core.py", "promotion_source") not in shared.pending  # the program's parse gave it
    assert (0, "pkg/tests/test_core.py", "promotion_source") in shared.pending  # the rules never read tests
    keys = [(0, p, "promotion_source") for p in NUMERIC if "/tests/" not in p]  # what the rules read
    got = {k: shared.get(k) for k in keys}
    # one parse each (notes.py: none, its text imports no library)
    assert sorted(_relative(dist, parsed)) == ["pkg/core.py", "pkg/kernels.py", "pkg/tests/test_core.py"]
    alone = gather([_fresh(dist)], config=Config(cache=False, jobs=1), extractors=names).extraction.facts
    assert {k: alone.get(k) for k in keys} == got
    assert got[(0, "pkg/core.py", "promotion_source")].can_cast and got[(0, "pkg/kernels.py", "promotion_source")].fused


def test_promotion_facts_extracted_along_in_the_workers_equal_their_own_extraction(tmp_path):
    from cuaudit.engine import gather

    files = {f"pkg/m{i}.py": f"import numpy as np\nfrom . import m{(i + 1) % 70}\nX{i} = np.uint8({250 + i})\n" for i in range(70)}
    dist = _installed(tmp_path, {"pkg/__init__.py": "from . import m0\n", **files}, compiled=False)
    names = ("import_time", "module_imports", "promotion_source")
    batch = gather([_fresh(dist)], config=Config(cache=False, jobs=2), extractors=names)
    facts = batch.extraction.facts
    facts.prefetch([(0, p, "import_time") for p in files])  # one batch in the workers
    assert batch.extraction.pools_started == 1
    assert not any(name == "promotion_source" and path in files for _, path, name in facts.pending)
    alone = gather([_fresh(dist)], config=Config(cache=False, jobs=1), extractors=names).extraction.facts
    keys = [(0, p, "promotion_source") for p in files]
    got = {k: facts.get(k) for k in keys}
    assert got == {k: alone.get(k) for k in keys}
    assert sum(bool(f.changed) for f in got.values()) == 64  # np.uint8(256) and above overflow


def test_an_audit_parses_each_module_once(tmp_path, parsed):
    dist = _installed(tmp_path, NUMERIC, compiled=True)
    report = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    seen = _relative(dist, parsed)
    assert len(seen) == len(set(seen)) and "pkg/core.py" in seen
    assert "pkg/notes.py" not in seen  # named numpy, imports nothing: no program read, no promotion parse
    uncompiled = audit([_installed(tmp_path, NUMERIC, compiled=False, sub="other")], config=Config(cache=False, jobs=1),
                       command="explain")
    assert [(f.code, f.location.member, f.message) for f in report.findings] == \
        [(f.code, f.location.member, f.message.replace(str(tmp_path / "other"), str(tmp_path / "site")))
         for f in uncompiled.findings]


# -- the promotion prefilter is exact ------------------------------------------------------------------

#: every way of importing numpy, cupy or cupyx that binds a name the analysis follows
IMPORT_SPELLINGS = [
    "import numpy\n", "import numpy as np\n", "import os, numpy\n", "import os,numpy.linalg as la\n",
    "import numpy . linalg\n", "import os, \\\n    numpy\n", "import os, \\\r\n    cupy\n", "import\tcupyx\n",
    "from numpy import uint8\n", "from cupyx.scipy import ndimage\n", "from \\\n numpy import uint8\n",
    "from numpy . linalg import norm\n", "x = 1; import cupy as cp\n", "if True: from numpy import uint8 as u8\n",
    "def f():\n    import numpy as np\n    return np\n", "try:\n    import cupy\nexcept ImportError:\n    pass\n",
]
#: texts naming a library without importing it, ASCII and without astype: no facts, known unparsed
NAMING_ONLY = [
    "# numpy\nX = 1\n", "'''Uses cupy when there is one.'''\n", "import mynumpy\nx = mynumpy.uint8(300)\n",
    "from mycupy import fuse\n@fuse()\ndef k(x):\n    return x + 1\n", "np = __import__('numpy')\nnp.can_cast(1, np.uint8)\n",
    "import importlib\nnp = importlib.import_module('numpy')\nnp.uint8(300)\n",
]


@pytest.mark.parametrize("text", IMPORT_SPELLINGS)
def test_every_import_of_a_library_passes_the_prefilter(text):
    from cuaudit.facts.promotion import analysed_facts, may_have_facts

    module = python_format.parse_python_text(text)
    assert module.ok and may_have_facts(text)
    facts = analysed_facts(module)
    assert facts.imports_numpy or facts.imports_cupy  # what an import the prefilter missed would lose


@pytest.mark.parametrize("text", NAMING_ONLY)
def test_what_the_prefilter_leaves_out_has_no_facts(text):
    from cuaudit.facts.promotion import analysed_facts, may_have_facts

    assert not may_have_facts(text)
    assert analysed_facts(python_format.parse_python_text(text)) == PromotionFacts()


def test_astype_and_non_ascii_text_are_analysed_without_an_import():
    from cuaudit.facts.promotion import analysed_facts, may_have_facts

    # no import: `.astype` alone gives the array a dtype (numpy named in the comment)
    text = "# numpy\nx = y.astype('uint8')\nz = x + 300\n"
    assert may_have_facts(text) and analysed_facts(python_format.parse_python_text(text)).changed
    assert may_have_facts("# numpy\nimport ｎｕｍｐｙ\n")  # NFKC: the parser reads `numpy`


def test_the_prefilter_is_exact_on_real_sources(corpus):
    import zipfile

    from conftest import corpus_file
    from cuaudit.facts.promotion import analysed_facts, may_have_facts
    from cuaudit.formats.python import decode_source

    left_out = 0
    for pattern in ("numpy-2.0.2-*.whl", "cupy_cuda12x-14.2.0-*.whl"):
        with zipfile.ZipFile(corpus_file(corpus, pattern)) as z:
            for name in z.namelist():
                if name.endswith((".py", ".pyi")):
                    text = decode_source(z.read(name), name)
                    if ("numpy" in text or "cupy" in text) and not may_have_facts(text):
                        left_out += 1
                        module = python_format.parse_python_text(text, name)
                        assert not module.ok or analysed_facts(module) == PromotionFacts(), name
    assert left_out > 20  # the narrower test does leave modules unparsed


def test_an_open_bundle_drops_the_facts_of_members_changed_since(tmp_path):
    # the facts read on demand live in one open bundle per distribution, keyed inside by each member's
    # key; when it is written again, the keys its members no longer have go (Extraction._bundle's ``current``)
    import time

    from cuaudit.extraction import Extraction

    dist = _installed(tmp_path, PACKAGE)
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=1)
    audit([dist], config=conf, command="explain")
    old = _fresh(dist).member("pkg/core.py").content_key
    time.sleep(0.01)
    (tmp_path / "site" / "pkg" / "core.py").write_text("import os\n\ndef f():\n    return os.sep * 2\n")
    audit([_fresh(dist)], config=conf, command="explain")
    ex = Extraction(conf, None)
    values = ex._bundle(_fresh(dist), "facts").values
    ex.store.close()
    new = _fresh(dist).member("pkg/core.py").content_key
    assert new != old
    assert any(k.endswith(new) for k in values) and not any(k.endswith(old) for k in values)


def test_a_walk_writes_the_facts_it_reads_while_the_workers_extract(tmp_path, monkeypatch, walking):
    # an import chain walked level by level in the workers: what came back is kept and written
    # while the parent waits on the next chunks (while none is back, extraction._LOOSE_SLICE at a
    # time), not all at once when the walk ends (the parent then computes the verdicts alone:
    # on the H200, 1.2 s of writing in front of them)
    import cuaudit.extraction as extraction

    files = {"pkg/__init__.py": "from . import m0\n", "pkg/m60.py": "Y = 1\n",
             **{f"pkg/m{i}.py": f"import pkg.m{i + 1}\nX = {i}\n" for i in range(60)}}
    dist = make_installed(tmp_path / "site", "pkg", files)
    monkeypatch.setattr(extraction, "_LOOSE_BATCH", 4)
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    written: list[int] = []
    write = extraction.Extraction._write_loose

    def spied_write(self, most=None):
        if walking[0] and self._loose:
            written.append(len(self._loose))
        return write(self, most)

    monkeypatch.setattr(extraction.Extraction, "_write_loose", spied_write)
    conf = Config(cache_dir=str(tmp_path / "cache"), jobs=2)
    first = audit([dist], config=conf, command="explain")
    assert len(written) >= 3, written  # several batches during the walk, not one at its end
    again = audit([dist], config=conf, command="explain")
    assert again.stats["facts_extracted"] == 0
    assert [(f.code, f.location.member) for f in again.findings] == [(f.code, f.location.member) for f in first.findings]


def test_a_fact_named_ahead_comes_along_with_its_members_parse_in_the_walk(tmp_path, monkeypatch):
    # CU103 names every package's python_source ahead; a package the import closures' walk reaches
    # has it extracted in the same chunk as its program (one parse, before the import family is
    # forked), not sent again when the walk ends (a second parse, which the forked child redid itself)
    from concurrent.futures import ProcessPoolExecutor

    import cuaudit.extraction as extraction

    files = {"pkg/__init__.py": "from . import _impl\nfrom . import api\n", "pkg/api.py": "X = 1\n",
             "pkg/_impl/__init__.py": "from . import _core\n", "pkg/_impl/_core.py": "Y = 2\n",
             **{f"pkg/_u{k}.py": f"U = {k}\n" for k in range(30)}}
    dist = make_installed(tmp_path / "site", "pkg", files)
    serial = audit([dist], config=Config(cache=False, jobs=1), command="explain")
    monkeypatch.setattr(extraction, "PARALLEL_MIN_TASKS", 1)
    sent: list[tuple[str, tuple[str, ...]]] = []
    real_submit = ProcessPoolExecutor.submit

    def spied_submit(self, fn, *args, **kwargs):
        chunk = next((a for a in args if isinstance(a, list)), [])  # extract_forked(i, chunk, cache folder)
        sent.extend((m.path, tuple(names)) for m, names in chunk)
        return real_submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", spied_submit)
    report = audit([make_installed(tmp_path / "site2", "pkg", files)], config=Config(cache=False, jobs=2), command="explain")
    impl = [names for path, names in sent if path == "pkg/_impl/__init__.py"]
    assert any("import_time" in names and "python_source" in names for names in impl), impl
    assert sum("python_source" in names for names in impl) == 1, impl  # never sent a second time
    assert [f.message.replace("site2", "site") for f in report.findings] == [f.message for f in serial.findings]

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


def test_without_bytecode_the_format_check_parses_every_module(tmp_path, parsed):
    dist = _installed(tmp_path, PACKAGE, compiled=False)
    audit([dist], config=Config(cache=False, jobs=1), command="explain")
    assert "pkg/_unread.py" in parsed  # the format check itself (CU006 must be found wherever it is)


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

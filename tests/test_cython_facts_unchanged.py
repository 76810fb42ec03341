"""The extension-module facts stay what they were: speed work on the Cython readers changes no fact.

The facts of ``cython-capi`` (:mod:`cuaudit.facts.cython`) and ``extension_strings`` of every
extension module of the corpus wheels that hold Cython modules (Cython 0.29 to 3.2: cupy,
numpy, rmm, cuda-bindings, cuda-python, fastrlock) are compared with goldens written by the
code before the speed work (``tests/golden/cython_facts/``): one line per member, a digest of
each fact's ``repr`` (or of the CU0xx problem it raised) and a short summary to read a diff by.
A deliberate change of a fact regenerates them:
``PYTHONPATH=src python tests/test_cython_facts_unchanged.py``.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest

from cuaudit.facts import MemberReader, WithProblems
from cuaudit.facts.cython import CythonCapiExtractor, CythonModule
from cuaudit.facts.extension_strings import ExtensionStringsExtractor
from cuaudit.model import InputError, Member, MemberKind

GOLDEN = Path(__file__).parent / "golden" / "cython_facts"
WHEELS = (
    "cupy_cuda12x-14.2.0-*.whl",  # Cython 3.2 (compressed string table)
    "cupy_cuda12x-13.3.0-*.whl",
    "cupy_cuda11x-12.3.0-*.whl",
    "numpy-2.0.2-cp311-*.whl",
    "numpy-1.26.4-cp311-*.whl",
    "rmm_cu12-24.12.0-*.whl",
    "cuda_bindings-12.9.4-*.whl",
    "cuda_bindings-13.0.3-*.whl",
    "cuda_python-12.6.1-*.whl",
    "cuda_python-12.6.2.post1-*.whl",
    "fastrlock-0.8.3-*.whl",
)


def _digest(value: object) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:20]


def _fact(extractor, reader: MemberReader) -> tuple[object, str]:
    try:
        value = extractor.extract(reader)
    except InputError as exc:
        return None, f"{exc.code}:{_digest(str(exc))}"
    return value, _digest(value)


def _summary(value: object) -> str:
    module = value.value if isinstance(value, WithProblems) else value
    if not isinstance(module, CythonModule):
        return "-"
    if not module.is_cython:
        return "not-cython"
    return (f"cython={module.cython or '?'} exports={len(module.exports)} imports={len(module.imports)} "
            f"types={len(module.type_imports)}/{len(module.types)} unresolved={len(module.unresolved)}"
            + (" partial" if isinstance(value, WithProblems) else ""))


def wheel_lines(wheel: Path) -> str:
    """One line per extension module of the wheel: path, the two facts' digests, a summary."""
    capi, strings = CythonCapiExtractor(), ExtensionStringsExtractor()
    lines = []
    with zipfile.ZipFile(wheel) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            member = Member(info.filename, MemberKind.ELF, info.file_size, "")
            wanted = [e for e in (capi, strings) if e.applies(member)]
            if not wanted:
                continue
            data = zf.read(info)
            if not data.startswith(b"\x7fELF"):
                continue
            reader = MemberReader(None, member, data)
            c_value, c_digest = _fact(capi, reader) if capi in wanted else (None, "-")
            _s_value, s_digest = _fact(strings, reader) if strings in wanted else (None, "-")
            lines.append(f"{info.filename}\t{c_digest}\t{s_digest}\t{_summary(c_value)}\n")
    return "".join(lines)


def golden_path(pattern: str) -> Path:
    return GOLDEN / (pattern.split("-*")[0].split("-cp311")[0] + ".txt")


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("pattern", WHEELS)
def test_extension_modules_give_the_facts_they_always_gave(corpus, pattern):
    from conftest import corpus_file

    wheel = corpus_file(corpus, pattern)
    assert wheel_lines(wheel) == golden_path(pattern).read_text(encoding="utf-8")


if __name__ == "__main__":  # regenerate the goldens (a deliberate change of the facts)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.home() / ".cache/cuaudit/corpus"
    for pattern in WHEELS:
        found = sorted(where.glob(pattern))
        if found:
            golden_path(pattern).write_text(wheel_lines(found[0]), encoding="utf-8")
            print(golden_path(pattern))

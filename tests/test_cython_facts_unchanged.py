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
import random
import struct
import sys
import zipfile
from itertools import accumulate
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


# -- the faster readers against their plain definitions (what the code before the speed work did) ----


def _lzss_plain(src: bytes, size: int) -> bytes | None:
    """Cython 3.3's LZSS read token by token from an iterator, each copy a byte at a time."""
    stream, out = iter(src), bytearray()
    try:
        while True:
            flags = next(stream)
            for bit in range(8):
                if flags >> bit & 1:
                    out.append(next(stream))
                else:
                    lo, hi = next(stream), next(stream)
                    if lo < 0x80:
                        back, extra = lo, hi
                    elif hi < 0x80:
                        back, extra = 0x80 + ((hi & 0x60) << 2 | lo & 0x7F), hi & 0x1F
                    else:
                        back, extra = 0x80 + ((hi & 0x7F) << 7 | lo & 0x7F), next(stream)
                    first = len(out) - back - (extra + 3)
                    if first < 0:
                        return None
                    for k in range(extra + 3):
                        out.append(out[first + k])
                if len(out) >= size:
                    return bytes(out) if len(out) == size else None
    except StopIteration:
        return None


def test_lzss_back_references_copy_what_the_byte_loop_copied():
    from cuaudit.facts.cython_blob import lzss_decompress

    # three literals, then a copy of the 3 bytes ending 0 bytes before the end: "abcabc"
    assert lzss_decompress(bytes([0b0111]) + b"abc" + bytes([0, 0]), 6) == b"abcabc"
    # a copy ending 1 byte before the end; a copy reaching before the start is not LZSS
    assert lzss_decompress(bytes([0b01111]) + b"abcd" + bytes([1, 0]), 7) == b"abcdabc"
    assert lzss_decompress(bytes([0b0111]) + b"abc" + bytes([1, 0]), 6) is None
    rng = random.Random(14)
    streams = []
    for _ in range(1500):
        tokens, made = [], 0  # (literal byte or None, copy bytes), and how long the output is by then
        for _token in range(rng.randrange(1, 200)):
            length = rng.randrange(3, 35)
            if made < length or rng.random() < 0.4:
                tokens.append((rng.randrange(256), b""))
                made += 1
                continue
            back = rng.randrange(0, made - length + 1)
            if back < 0x80 and rng.random() < 0.5:
                lo, hi, more = back, length - 3, b""  # short form
            elif back - 0x80 < 0x200 and length - 3 < 0x20 and rng.random() < 0.5 and back >= 0x80:
                b = back - 0x80  # medium form: 9 bits of distance, 5 of length
                lo, hi, more = 0x80 | (b & 0x7F), ((b >> 2) & 0x60) | (length - 3), b""
            elif back >= 0x80:
                b = back - 0x80  # long form: 14 bits of distance, a byte of length
                lo, hi, more = 0x80 | (b & 0x7F), 0x80 | (b >> 7), bytes([length - 3])
            else:
                lo, hi, more = back, length - 3, b""
            tokens.append((None, bytes([lo, hi]) + more))
            made += length
        body = bytearray()
        for k in range(0, len(tokens), 8):
            group = tokens[k : k + 8]
            body.append(sum(1 << bit for bit, (literal, _copy) in enumerate(group) if literal is not None))
            for literal, copy in group:
                body += bytes([literal]) if literal is not None else copy
        data = bytes(body)
        streams += [(data, made), (data, rng.randrange(1, made + 1)), (data, made + 1),
                    (data[: rng.randrange(len(data))], made), (bytes([data[0] ^ 0xFF]) + data[1:], made)]
    assert [lzss_decompress(d, n) for d, n in streams] == [_lzss_plain(d, n) for d, n in streams]
    assert sum(lzss_decompress(d, n) is not None for d, n in streams) > 1500


class _Rodata:
    def __init__(self, words: list[int]) -> None:
        self.words = struct.pack(f"<{len(words)}I", *words)

    def section_bytes(self, name: str) -> tuple[int, bytes]:
        return 0x1000, self.words


def _longest_run(words: list[int], total: int) -> tuple[int, int] | None:
    """[start, stop) of the longest run of two or more words adding up to ``total`` (of the longest,
    the one that ends first), trying every run."""
    sums = list(accumulate(words, initial=0))
    runs = [(stop - start, -stop, start) for stop in range(len(words) + 1) for start in range(stop - 1)
            if sums[stop] - sums[start] == total]
    if not runs:
        return None
    _length, end, start = max(runs)
    return start, -end


def test_the_string_index_is_the_longest_run_adding_up_to_the_blob():
    from cuaudit.facts.cython_blob import split_strings

    rng = random.Random(32)
    for _ in range(500):
        words = [rng.choice((0, 0, rng.randrange(12), rng.randrange(40), rng.randrange(1 << 32)))
                 for _word in range(rng.randrange(0, 70))]
        blob = bytes(rng.randrange(256) for _byte in range(rng.choice((0, 1, 5, 30, 60))))
        run = _longest_run(words, len(blob))
        cuts = list(accumulate(words[run[0] : run[1]], initial=0)) if run else []
        expected = [blob[a:b] for a, b in zip(cuts, cuts[1:])] if run else None
        assert split_strings(_Rodata(words), blob) == expected, (words, len(blob))


def test_whole_c_strings_are_what_the_look_behind_scans_found():
    import re

    from cuaudit.facts.extension_strings import _DOTTED, identifier_strings, import_evidence

    ident = re.compile(rb"(?<=\x00)[A-Za-z_][A-Za-z0-9_]{1,64}(?=\x00)")
    whole = re.compile(rb"(?<=\x00)" + _DOTTED.pattern + rb"(?=\x00)")
    rng = random.Random(65)
    pieces = [b"", b"a", b"ab", b"cupy.cuda.common", b"x" * 65, b"y" * 66, b"a.b.c.d.e.f.g.h.i", b"a." * 9 + b"z",
              b"1abc", b"_ok", b"has space", b"pkg.mod\xff", b"m.n", b".lead", b"trail.", b"a..b"]
    for _ in range(400):
        data = bytes(rng.choice((0, 0, 32, 46, 65, 95, 97, 122, 200))
                     for _byte in range(rng.randrange(40))).join(rng.choices(pieces, k=rng.randrange(1, 12)))
        data = rng.choice((b"", b"\0", b"a.b")) + data + rng.choice((b"", b"\0", b"c.d"))
        assert identifier_strings(data) == tuple(sorted({m.group().decode() for m in ident.finditer(data)}))
        assert import_evidence(data, []) == tuple(sorted({m.group().decode() for m in whole.finditer(data)}))


if __name__ == "__main__":  # regenerate the goldens (a deliberate change of the facts)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.home() / ".cache/cuaudit/corpus"
    for pattern in WHEELS:
        found = sorted(where.glob(pattern))
        if found:
            golden_path(pattern).write_text(wheel_lines(found[0]), encoding="utf-8")
            print(golden_path(pattern))

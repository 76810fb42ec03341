"""Inputs on the real public artifacts of the corpus (tests/corpus.toml, docs/corpus.md).

The real wheels and sdists must list without any CU0xx problem (no false
alarm from the zip-bomb and traversal checks on honest archives of up to
12,000 members and 900 MB), and real archives damaged here must give their
CU0xx finding while the rest of the corpus is audited.
"""

from __future__ import annotations

import shutil
import zipfile

import pytest
from conftest import corpus_file
from marker_rules import marker_rules, only_cu0  # noqa: F401 - fixture

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.inputs import resolve
from cuaudit.model import ArtifactKind

pytestmark = pytest.mark.corpus


def test_every_corpus_archive_lists_cleanly(corpus):
    paths = sorted(str(p) for p in corpus.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip")))
    assert paths
    for art in resolve(paths):
        members = art.members
        assert art.problems == [], (art.ref.path, [f.message for f in art.problems])
        assert members, art.ref.path
        if art.ref.kind is ArtifactKind.WHEEL:
            with zipfile.ZipFile(art.ref.path) as zf:
                files = [i for i in zf.infolist() if not i.is_dir()]
            assert len(members) == len(files)


def test_torch_wheel_is_listed_without_reading_its_data(corpus):
    torch = corpus_file(corpus, "torch-2.8.0-*.whl")
    [art] = resolve([str(torch)])
    assert len(art.members) > 11000
    so = [m for m in art.members if m.path == "torch/lib/libtorch_cuda.so"]
    assert so and so[0].kind.value == "elf" and so[0].size > 500 * 1024**2


def test_real_sdist_without_wheel(corpus):
    sdist = corpus_file(corpus, "torch_linear_assignment-0.0.5.tar.gz")
    report = audit([str(sdist)], config=only_cu0(cache=False))
    ref = report.artifacts[0]
    assert (ref.kind, ref.version) == (ArtifactKind.SDIST, "0.0.5")
    assert report.findings == []
    [art] = resolve([str(sdist)])
    assert "setup.py" in {m.path for m in art.members}


def test_damaged_real_wheels(corpus, tmp_path, marker_rules):
    real = corpus_file(corpus, "fastrlock-0.8.3-*.whl")
    truncated = tmp_path / real.name.replace("fastrlock", "fastrlock_cut")
    truncated.write_bytes(real.read_bytes()[: real.stat().st_size // 2])
    # flip bytes inside the compressed data of fastrlock/__init__.py: found when read
    flipped = tmp_path / real.name
    shutil.copy(real, flipped)
    with zipfile.ZipFile(flipped) as zf:
        info = zf.getinfo("fastrlock/__init__.py")
    data = bytearray(flipped.read_bytes())
    # the local extra field may differ from the central one: read its length from the local header
    start = info.header_offset + 30 + int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little") \
        + int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    for i in range(start, start + min(info.compress_size, 8)):
        data[i] ^= 0xFF
    flipped.write_bytes(bytes(data))
    good = corpus_file(corpus, "nvidia_cuda_nvrtc_cu11-*.whl")
    report = audit([str(truncated), str(flipped), str(good)], config=only_cu0(cache=False))
    by_path = {}
    for f in report.findings:
        by_path.setdefault(f.location.artifact.path, []).append(f)
    assert [f.code for f in by_path[str(truncated)]] == ["CU002"]
    [bad] = by_path[str(flipped)]
    assert bad.code == "CU002" and bad.location.member == "fastrlock/__init__.py"
    assert str(good) not in by_path and len(report.artifacts) == 3

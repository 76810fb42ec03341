"""``cuaudit env --package``: the rules compute the named distributions' findings (and those of what
they require) only, and the report is what narrowing the whole environment's report gives.

An environment of four distributions and a NumPy 2 stand-in: ``top`` requires ``mid``, which
requires ``leaf``; ``other`` is unrelated, and only an extra of ``top`` names it.  Each has a
submodule trap (CU101), a Python scalar given to ``numpy.can_cast`` (CU402), a lazy-loading table
that names a missing module (CU103), an extension linked against a library it does not use (CU201),
and imports the one below it, so that the traps of ``top`` are
judged over the others' modules.
"""

from __future__ import annotations

import json

import pytest

from conftest import answering_interpreter, compile_so, make_tree

from cuaudit.commands.env import only_packages
from cuaudit.config import Config
from cuaudit.engine import audit

REQUIRES = {"top": ["mid", "other[x]; extra == 'gpu'"], "mid": ["leaf"], "leaf": ["numpy"], "other": ["numpy"]}
BELOW = {"top": "mid", "mid": "leaf", "leaf": "", "other": "leaf"}


def _site(tmp_path):
    site = tmp_path / "site"
    # an extension module linked against a library it does not use (CU201, over-linking)
    build = tmp_path / "build"
    build.mkdir()
    ext = compile_so(build, "_ext.so", "int answer(void) { return 42; }\n", flags=["-Wl,--no-as-needed"], libs=["m"])
    files: dict[str, str | bytes] = {}
    for name, requires in REQUIRES.items():
        info = f"{name}-1.0.dist-info"
        below = BELOW[name]
        files |= {
            f"{info}/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n%s" % (
                name, "".join(f"Requires-Dist: {r}\n" for r in requires)),
            f"{info}/top_level.txt": f"{name}\n",
            f"{name}/__init__.py": (f"import {below}\n" if below else "") + "from . import used\n",
            f"{name}/used.py": "import numpy as np\nok = np.can_cast(300, np.uint8)\n",
            f"{name}/unbound.py": "",
            f"{name}/_ext.cpython-311-x86_64-linux-gnu.so": ext.read_bytes(),
            f"{name}/lazy/__init__.py": "import lazy_loader as lazy\n"
                                        "__getattr__, __dir__, __all__ = lazy.attach(__name__, submodules=['gone'])\n",
        }
        rows = [f"{p},," for p in files if p.startswith((f"{name}/", info))]
        files[f"{info}/RECORD"] = "\n".join(rows + [f"{info}/RECORD,,"]) + "\n"
    # NumPy 2 (a stand-in): `import numpy` works, and the CU4xx rules know which NumPy runs
    files |= {"numpy-2.0.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: numpy\nVersion: 2.0.0\n",
              "numpy-2.0.0.dist-info/top_level.txt": "numpy\n", "numpy/__init__.py": "uint8 = 1\ndef can_cast(a, b):\n    return True\n",
              "numpy-2.0.0.dist-info/RECORD": "numpy/__init__.py,,\nnumpy-2.0.0.dist-info/METADATA,,\n"}
    make_tree(site, files)
    return answering_interpreter(tmp_path / "python", site)


def _rows(report) -> list[str]:
    return sorted(json.dumps([f.code, f.location.artifact.name, f.location.member, f.location.line, f.message,
                              str(f.severity)]) for f in report.findings)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_focused_audit_reports_what_narrowing_the_whole_one_reports(tmp_path, jobs, monkeypatch):
    import cuaudit.workers as workers

    python = _site(tmp_path)
    read: list[tuple[str, str]] = []  # (member, extractor) extracted in this process (all of them with jobs 1)
    real = workers._extracted

    def extracted(member, name, ex, reader):
        read.append((member.path, name))
        return real(member, name, ex, reader)

    monkeypatch.setattr(workers, "_extracted", extracted)
    whole = audit([], env=str(python), config=Config(cache=False, jobs=jobs), command="env")
    by_dist = {}
    for f in whole.findings:
        by_dist.setdefault(f.location.artifact.name, set()).add(f.code)
    # every distribution has findings of the families the focus narrows: the comparison is not empty
    for name in REQUIRES:
        assert {"CU101", "CU103", "CU201", "CU402"} <= by_dist.get(name, set()), (name, by_dist)
    for named in (["top"], ["mid"], ["other"], ["leaf", "other"]):
        read.clear()
        focused = audit([], env=str(python), config=Config(cache=False, jobs=jobs, focus=tuple(named)), command="env")
        expected, got = only_packages(whole, named), only_packages(focused, named)
        assert _rows(got) == _rows(expected), named
        assert [a.name for a in got.artifacts] == [a.name for a in expected.artifacts]
        # the others' findings of the narrowed families were never computed, nor their facts read
        kept = {a.name for a in expected.artifacts}
        assert {f.location.artifact.name for f in focused.findings if f.code in ("CU101", "CU103", "CU201", "CU402")} == (
            kept & set(REQUIRES))
        assert focused.stats["facts_extracted"] < whole.stats["facts_extracted"], (named, focused.stats)
        if jobs == 1:  # nothing at all is read of a distribution outside the focus that nothing in it imports
            outside = set(REQUIRES) - kept - {BELOW[k] for k in kept if k in BELOW}
            assert read and not [r for r in read if r[0].split("/")[0] in outside], (named, read)


def test_env_package_on_the_command_line_audits_with_the_focus(tmp_path, cli, monkeypatch):
    """``--package`` sets the focus (the whole run's report narrowed gives the same findings) and
    unknown names are still a usage error."""
    python = _site(tmp_path)
    rc, whole_out, err = cli("env", "--python", python, "--isolated", "--no-cache", "-f", "json", "--exit-zero")
    assert rc == 0, err
    seen = {}
    import cuaudit.engine as engine

    real = engine.audit

    def spy(*args, **kwargs):
        seen["focus"] = kwargs["config"].focus
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "audit", spy)
    rc, out, err = cli("env", "--python", python, "--isolated", "--no-cache", "-f", "json", "--exit-zero",
                       "--package", "Mid")
    assert rc == 0, err
    assert seen["focus"] == ("mid",)
    got = json.loads(out)
    assert {i["name"] for i in got["inputs"]} == {"mid", "leaf", "numpy"}
    codes = {(f["code"], f["location"]["artifact"]["name"]) for f in got["findings"]}
    assert ("CU101", "mid") in codes and ("CU402", "leaf") in codes and ("CU101", "leaf") not in codes
    whole = {(f["code"], f["location"]["artifact"]["name"], f["location"]["member"], f["message"])
             for f in json.loads(whole_out)["findings"]}
    assert {(f["code"], f["location"]["artifact"]["name"], f["location"]["member"], f["message"])
            for f in got["findings"]} <= whole
    rc, out, err = cli("env", "--python", python, "--isolated", "--no-cache", "--package", "no-such-dist")
    assert rc == 2 and "no-such-dist" in err


def test_a_focused_audit_and_a_whole_one_share_a_cache_without_changing_each_other(tmp_path):
    """The focus reads facts on demand that a whole audit extracts up front (and leaves the rest
    unread): whatever ran before with the same cache, each audit reports what it reports fresh."""
    python = _site(tmp_path)
    fresh = {named: _rows(only_packages(audit([], env=str(python), config=Config(cache=False, jobs=1, focus=named),
                                              command="env"), list(named)))
             for named in (("top",), ("other",))}
    whole = _rows(audit([], env=str(python), config=Config(cache=False, jobs=1), command="env"))
    cache = str(tmp_path / "cache")
    for step in (("top",), (), ("other",), (), ("top",)):
        got = audit([], env=str(python), config=Config(cache_dir=cache, jobs=1, focus=step), command="env")
        assert (_rows(only_packages(got, list(step))) == fresh[step]) if step else (_rows(got) == whole), step

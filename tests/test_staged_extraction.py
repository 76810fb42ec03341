"""Rules run as soon as the facts they need are in: the extraction goes rule by rule (stages), and
the parent computes the import rules while the workers still inflate the libraries only the
linkage rules read.  Findings are the same as when every fact is extracted first."""

from __future__ import annotations

import json

import pytest
from conftest import compile_so, make_wheel

from cuaudit import audit, extraction, rule_run
from cuaudit.config import Config
from cuaudit.model import Member, MemberKind
from cuaudit.report import render


@pytest.fixture(scope="module")
def mixed_wheel(tmp_path_factory):
    """Python with a submodule trap (CU1xx) and enough modules for the workers, and an over-linked
    library (CU201: its facts are read only by the linkage rules, a later stage)."""
    d = tmp_path_factory.mktemp("staged")
    lib = compile_so(d, "libstaged.so", "int staged(void) { return 1; }\n", libs=["m"], flags=["-Wl,--no-as-needed"])
    # an extension module: its strings are read by the import rules, the first stage
    ext = compile_so(d, "_ext.so", 'const char *name = "trappkg._ext";\nint PyInit__ext(void) { return 0; }\n')
    files = {
        "trappkg/__init__.py": "VERSION = 1\n",
        "trappkg/comm/__init__.py": "",
        "trappkg/comm/nccl.py": "def init():\n    return 1\n",
        "trappkg/use.py": "import trappkg.comm\n\ndef go():\n    return trappkg.comm.nccl.init()\n",
        "trappkg/lib/libstaged.so": lib.read_bytes(),
        "trappkg/_ext.cpython-311-x86_64-linux-gnu.so": ext.read_bytes(),
        **{f"trappkg/m{k}.py": f"import os\n\nX{k} = os.sep * {k}\n" for k in range(40)},
    }
    return make_wheel(d, "trappkg", "1.0", files, tag="py3-none-manylinux_2_17_x86_64")


def _report(path, **config) -> tuple[str, list[str]]:
    report = audit([str(path)], config=Config(cache=False, **config))
    doc = json.loads(render(report, "json"))
    doc.pop("stats", None)
    return json.dumps(doc, sort_keys=True), sorted(f.code for f in report.findings)


def _spy_stages(monkeypatch):
    """Each mid-extraction call of the rules: (rules run so far, whether the Python and the
    library facts were in when it came)."""
    calls: list[tuple[int, bool, bool]] = []
    real = rule_run.RuleRun.run_until

    def run_until(self, last):
        facts = self.ctx._facts
        py_in = dict.__contains__(facts, (0, "trappkg/use.py", "import_time"))
        lib_in = dict.__contains__(facts, (0, "trappkg/lib/libstaged.so", "elf"))
        calls.append((self.ran, py_in, lib_in))
        real(self, last)

    monkeypatch.setattr(rule_run.RuleRun, "run_until", run_until)
    return calls


@pytest.mark.parametrize("jobs", [1, 2])
def test_import_rules_run_before_the_library_facts_are_extracted(monkeypatch, mixed_wheel, jobs):
    calls = _spy_stages(monkeypatch)
    _text, codes = _report(mixed_wheel, jobs=jobs)
    assert "CU101" in codes and "CU201" in codes
    # the first call came with the sources' facts in and the library's still to come
    first_ran, py_in, lib_in = calls[0]
    assert first_ran == 0 and py_in and not lib_in
    # ...and it was not the last: the linkage rules ran after the library's facts came
    assert len(calls) >= 2 and calls[-1][2]


def test_findings_are_those_of_one_stage(monkeypatch, mixed_wheel):
    staged, staged_codes = _report(mixed_wheel, jobs=2)
    monkeypatch.setattr(rule_run.RuleRun, "stage", lambda self, names: 0)  # every fact first, then every rule
    whole, whole_codes = _report(mixed_wheel, jobs=2)
    assert staged_codes == whole_codes and "CU101" in whole_codes and "CU201" in whole_codes
    assert staged == whole
    assert _report(mixed_wheel, jobs=1)[0] == whole


def test_a_fact_read_before_its_stage_is_an_error_not_a_silent_none():
    facts = extraction.Facts()
    facts[(0, "a.py", "import_time")] = "program"
    facts.coming.add((0, "lib.so", "elf"))
    assert facts.get((0, "a.py", "import_time")) == "program"
    assert facts.get((0, "b.py", "import_time")) is None  # no such fact: None, as ever
    with pytest.raises(extraction.FactNotReady, match="elf fact of lib.so"):
        facts.get((0, "lib.so", "elf"))


def test_a_rule_that_reads_a_fact_it_does_not_name_is_cu011(monkeypatch, mixed_wheel):
    # CU101 made to read the library's ELF facts without naming them: with the stages, it would
    # see none (they come later); the read fails loudly instead
    from cuaudit.rules.imports import SubmoduleNotBound

    real = SubmoduleNotBound.check

    def check(self, ctx):
        for art in ctx.artifacts:
            ctx.fact("elf", art, "trappkg/lib/libstaged.so")
        return real(self, ctx)

    monkeypatch.setattr(SubmoduleNotBound, "check", check)
    report = audit([str(mixed_wheel)], config=Config(cache=False, jobs=2))
    failed = [f for f in report.findings if f.code == "CU011"]
    assert failed and "read before it was extracted" in failed[0].message


def _chunk(path: str, size: int) -> list:
    return [(Member(path, MemberKind.ELF if path.endswith(".so") else MemberKind.PYTHON, size, path), ("x",))]


def test_a_late_group_that_would_end_alone_is_sent_first():
    py = [(0, 0, _chunk(f"m{k}.py", 1_000_000)) for k in range(6)]  # 6 x 50 M of Python cost
    huge = (5, 0, _chunk("libbig.so", 400_000_000))  # read only by a later rule, but half the work
    small = (5, 0, _chunk("libsmall.so", 1_000_000))
    order = extraction._send_order(py + [small, huge], jobs=2)
    assert order[0] == 7  # the huge library first, whatever its stage
    assert order[1:7] == list(range(6)) and order[7] == 6  # then stage by stage
    # a late group no costlier than its share waits for its stage
    assert extraction._send_order(py + [small], jobs=2) == list(range(7))


@pytest.fixture(scope="module")
def mixed_installed(tmp_path_factory, mixed_wheel):
    """The same files installed: an environment's import facts are read on demand by the rules."""
    import zipfile

    from conftest import make_installed

    with zipfile.ZipFile(mixed_wheel) as zf:
        files = {n: zf.read(n) for n in zf.namelist() if not n.startswith("trappkg-1.0.dist-info/")}
    return make_installed(tmp_path_factory.mktemp("site"), "trappkg", files)


def test_an_environment_runs_its_import_rules_before_its_libraries_are_read(monkeypatch, mixed_installed):
    calls = _spy_stages(monkeypatch)
    report = audit([mixed_installed], config=Config(cache=False, jobs=2))
    codes = sorted(f.code for f in report.findings)
    assert "CU101" in codes and "CU201" in codes
    # the rules ran once the extension module's strings were in, before the library's facts were
    assert calls[0][0] == 0 and not calls[0][2]
    # and found what a run with every fact first finds
    monkeypatch.setattr(rule_run.RuleRun, "stage", lambda self, names: 0)
    whole = audit([mixed_installed], config=Config(cache=False, jobs=2))
    assert [f.message for f in report.findings] == [f.message for f in whole.findings]


def test_held_stages_go_out_one_per_worker_and_each_return_sends_the_next():
    from concurrent.futures import Future

    sent: list[tuple[int, Future]] = []

    def submit(i, chunk):
        fut: Future = Future()
        sent.append((chunk, fut))
        return fut

    groups = [(1, 0, k) for k in range(6)]
    feeder = extraction._Feeder(None, submit, groups, 2, held=[0, 1, 2, 3, 4, 5])
    feeder.feed()
    assert [c for c, _ in sent] == [0, 1]  # one per worker, in send order
    feeder.feed()
    assert len(sent) == 2  # nothing more while both are out
    sent[0][1].set_result([])  # a worker brings one back: the next goes out without the parent
    assert [c for c, _ in sent] == [0, 1, 2]
    sent[1][1].set_result([])
    sent[2][1].set_result([])
    assert [c for c, _ in sent] == [0, 1, 2, 3, 4]
    assert 5 not in feeder.futures  # still held: two are out
    for _c, f in list(sent[3:]):
        f.set_result([])
    assert [c for c, _ in sent] == [0, 1, 2, 3, 4, 5] and not feeder.held


def test_a_held_group_that_failed_sends_nothing_from_the_pools_thread():
    # a pool breaking fails its futures from its own thread while holding its lock (3.12): a submit
    # from the callback then waited forever (a test that kills a worker hung the suite on 3.12)
    from concurrent.futures import Future

    sent: list[Future] = []

    def submit(i, chunk):
        fut: Future = Future()
        sent.append(fut)
        return fut

    feeder = extraction._Feeder(None, submit, [(1, 0, k) for k in range(4)], 1, held=[0, 1, 2, 3])
    feeder.feed()
    assert len(sent) == 1
    sent[0].set_exception(RuntimeError("a worker died"))
    assert len(sent) == 1  # nothing sent from the failing pool's thread
    feeder.feed()  # the parent, later, goes on
    assert len(sent) == 2
    sent[1].cancel()
    assert len(sent) == 2

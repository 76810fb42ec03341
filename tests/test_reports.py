"""Report formats: text, JSON, SARIF, GitHub annotations, HTML.

The inputs are built here: a source tree, a tiny wheel, an installed
distribution in a site directory made for the test, and a missing path.
Findings come from a test-only rule (CU099) that reports fixed locations on
artifacts whose name starts with ``report-fixture``, so these tests do not
depend on any rule family.  Then golden outputs (``tests/golden/``,
regenerate with ``CUAUDIT_UPDATE_GOLDEN=1``, read when this module is
imported, before conftest clears ``CUAUDIT_*`` variables), the official SARIF 2.1.0
schema, ``docs/schema/report-v1.json``, and the CLI.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from conftest import REPO, corpus_file, make_tree, make_wheel

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.engine import ProbeRecord, Report
from cuaudit.inputs.environment import find_distributions
from cuaudit.model import Applicability, Edit, EnvironmentInfo, Fix, Location, Severity
from cuaudit.report import github as github_report
from cuaudit.report import html as html_report
from cuaudit.report import json_report, sarif, text
from cuaudit.rules import _REGISTRY, Rule

GOLDEN = Path(__file__).parent / "golden"
SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
SARIF_SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
REPORT_SCHEMA = REPO / "docs" / "schema" / "report-v1.json"
UPDATE = bool(os.environ.get("CUAUDIT_UPDATE_GOLDEN"))
MARKER = "report-fixture"
HOSTILE = "<script>alert('x')</script> 100% done, a:b\nsecond line"
WEIRD_MEMBER = "pkg/we<i>rd</i> name%,:.py"


class ReportFixtureRule(Rule):
    """## What it does
    Test-only: reports fixed locations on artifacts named ``report-fixture*``.

    ## Why is this bad?
    It is not; it gives the report tests findings of every location shape.

    ## Example
    ```
    report-fixture-src/pkg/mod.py:2:5: CU099 ...
    ```

    ## Use instead
    Nothing.

    ## Fix safety
    The edit on `pkg/mod.py` is safe.
    """

    code = "CU099"
    name = "report-fixture"
    summary = "Test-only rule of tests/test_reports.py"
    severity = Severity.WARNING
    needs = ()

    def check(self, ctx):
        for art in ctx.artifacts:
            ref = art.ref
            if not (ref.name or "").replace("_", "-").startswith(MARKER):
                continue
            if ref.kind.value == "tree":
                yield self.finding(
                    Location(ref, "pkg/mod.py", line=2, column=5, end_line=2, end_column=19),
                    "cupy.cuda.nccl is reached as an attribute without importing it",
                    fix=Fix(
                        "import the submodule",
                        (Edit("pkg/mod.py", 1, 1, 1, 12, "import cupy.cuda.nccl"),),
                        Applicability.SAFE,
                    ),
                    evidence={"chain": "cupy.cuda.nccl", "imported": ["cupy"], "nested": {"depth": 2}},
                    key="cupy.cuda.nccl",
                )
                yield self.finding(Location(ref), "the project as a whole", severity=Severity.INFO, key="tree")
            elif ref.kind.value == "wheel":
                yield self.finding(
                    Location(ref, "pkg/_ext.so", symbol="libcublas.so.12"),
                    "DT_NEEDED libcublas.so.12 but no symbol of it is used",
                    fix=Fix(user="pip install nvidia-cublas-cu12", maintainer="link with -Wl,--as-needed"),
                    severity=Severity.ERROR,
                    evidence={"needed": ["libcublas.so.12", "libc.so.6"], "used": set()},
                    key="libcublas.so.12",
                )
                yield self.finding(
                    Location(ref, "pkg/_ext.so", symbol="cublasCreate_v2"),
                    "imports cublasCreate_v2",
                    severity=Severity.INFO,
                    key="cublasCreate_v2",
                )
                yield self.finding(Location(ref, WEIRD_MEMBER, line=1, column=1), HOSTILE, key="weird")
                yield self.finding(Location(ref), "the wheel as a whole", severity=Severity.INFO, key="wheel")
            elif ref.kind.value == "installed":
                yield self.finding(
                    Location(ref, "report_fixture_inst/_cuda.so", symbol="cudaMalloc"),
                    "cudaMalloc comes from libcudart.so.11.0, which is not installed",
                    severity=Severity.ERROR,
                    evidence={"symbol_kind": "function", "library": "libcudart.so.11.0"},
                    key="cudaMalloc",
                    origin="probe",
                )
                yield self.finding(Location(ref), "the distribution as a whole", key="dist")
                ctx.record_probe(
                    ProbeRecord("import report_fixture_inst", "python -c 'import report_fixture_inst'", 0.25, "ok")
                )


# Defining the class registered it; only this module's tests see it (other
# test modules list all rules and must not find a test-only code).
_REGISTRY.pop(ReportFixtureRule.code, None)


@pytest.fixture(autouse=True)
def _fixture_rule():
    _REGISTRY[ReportFixtureRule.code] = ReportFixtureRule
    yield
    _REGISTRY.pop(ReportFixtureRule.code, None)


# -- the fixture inputs ----------------------------------------------------------------


def build_inputs(base: Path) -> dict[str, Path]:
    """A tree, a wheel, a site directory with one installed distribution, a missing path."""
    tree = make_tree(
        base / "src",
        {
            "pyproject.toml": '[project]\nname = "report-fixture-src"\nversion = "0.1"\n',
            "pkg/__init__.py": "",
            "pkg/mod.py": "import cupy\nx = cupy.cuda.nccl\n",
        },
    )
    (base / "dist").mkdir()
    wheel = make_wheel(
        base / "dist",
        "report-fixture-wheel",
        "1.0",
        {"pkg/__init__.py": "", "pkg/_ext.so": b"\x7fELF-not-really", WEIRD_MEMBER: "x = 1\n"},
    )
    site = base / "site-packages"
    info = site / "report_fixture_inst-2.0.dist-info"
    make_tree(
        site,
        {
            "report_fixture_inst/__init__.py": "",
            "report_fixture_inst/_cuda.so": b"\x7fELF-not-really",
            "report_fixture_inst-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: report-fixture-inst\nVersion: 2.0\n",
            "report_fixture_inst-2.0.dist-info/RECORD": "\n".join(
                [
                    "report_fixture_inst/__init__.py,,",
                    "report_fixture_inst/_cuda.so,,",
                    "report_fixture_inst/gone.py,,",  # listed, not on disk: skipped
                    "report_fixture_inst-2.0.dist-info/METADATA,,",
                    "report_fixture_inst-2.0.dist-info/RECORD,,",
                ]
            )
            + "\n",
        },
    )
    assert info.is_dir()
    # The missing input is named relative to the working directory, as a user would.
    return {"base": base, "tree": tree, "wheel": wheel, "site": site, "missing": Path("dist/missing-1.0-py3-none-any.whl")}


def fixture_report(inputs: dict[str, Path], **config) -> Report:
    dists = find_distributions([str(inputs["site"])])
    assert [d.ref.name for d in dists] == ["report-fixture-inst"]
    cfg = Config(select=("CU001", "CU099"), cache=False, jobs=1, **config)
    return audit([str(inputs["tree"]), str(inputs["wheel"]), str(inputs["missing"]), *dists], config=cfg)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    return build_inputs(tmp_path_factory.mktemp("report-inputs"))


@pytest.fixture
def report(inputs, monkeypatch) -> Report:
    monkeypatch.chdir(inputs["base"])  # %SRCROOT% is the working directory
    return fixture_report(inputs)


# -- golden outputs ----------------------------------------------------------------------


def normalise(doc: dict, base: Path) -> str:
    """The document with the fixture directory, the tool version and run statistics made constant."""
    doc = json.loads(json.dumps(doc))
    if "runs" in doc:
        run = doc["runs"][0]
        run["tool"]["driver"]["version"] = run["tool"]["driver"]["semanticVersion"] = "<VERSION>"
        run["properties"]["stats"] = {}
    else:
        doc["tool"]["version"] = "<VERSION>"
        doc["stats"] = {}
    out = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return out.replace(str(base.resolve()), "<FIXTURES>").replace(str(base), "<FIXTURES>")


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"{path} does not exist; run with CUAUDIT_UPDATE_GOLDEN=1 to create it")
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8"), f"{name} changed; CUAUDIT_UPDATE_GOLDEN=1 regenerates it"


def test_golden_json(report, inputs):
    check_golden("report.json", normalise(json_report.document(report), inputs["base"]))


def test_golden_sarif(report, inputs):
    check_golden("report.sarif", normalise(sarif.log(report), inputs["base"]))


def test_outputs_are_deterministic(inputs, monkeypatch):
    monkeypatch.chdir(inputs["base"])
    a, b = fixture_report(inputs), fixture_report(inputs)
    for fmt in (json_report, sarif):
        assert normalise(json.loads(fmt.render(a)), inputs["base"]) == normalise(json.loads(fmt.render(b)), inputs["base"])
    assert html_report.render(a).split("<footer>")[0] == html_report.render(b).split("<footer>")[0]


# -- SARIF: the official schema and the location scheme ---------------------------------------


def sarif_validator() -> jsonschema.Validator:
    raw = SARIF_SCHEMA.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SARIF_SCHEMA_SHA256, "tests/data/sarif-schema-2.1.0.json was edited"
    schema = json.loads(raw)
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    return jsonschema.Draft4Validator(schema)


def assert_valid_sarif(doc: dict) -> None:
    errors = sorted(sarif_validator().iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    _check_sarif_references(doc)


def _check_sarif_references(doc: dict) -> None:
    """What the schema cannot say: indexes point at the right entries, URIs are URI references."""
    for run in doc["runs"]:
        rules = run["tool"]["driver"]["rules"]
        artifacts = run.get("artifacts", [])
        bases = run.get("originalUriBaseIds", {})
        for b in bases.values():
            assert b["uri"].startswith("file:///") and b["uri"].endswith("/")
        for i, a in enumerate(artifacts):
            if "parentIndex" in a:
                assert a["parentIndex"] < i and "parentIndex" not in artifacts[a["parentIndex"]]
                assert "uriBaseId" not in a["location"]  # SARIF 3.4.4: nested artifacts have none
        assert sorted({r["id"] for r in rules}) == [r["id"] for r in rules]
        for result in run["results"]:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
            assert len(result["locations"]) == 1  # GitHub needs one location with a non-empty uri
            loc = result["locations"][0]["physicalLocation"]["artifactLocation"]
            assert loc["uri"] and not re.search(r"[\s<>%](?![0-9A-F]{2})", loc["uri"]), loc["uri"]
            if "uriBaseId" in loc:
                assert loc["uriBaseId"] in bases
            if "index" in loc:
                assert artifacts[loc["index"]]["location"]["uri"] == loc["uri"]
            for fix in result.get("fixes", []):
                for change in fix["artifactChanges"]:
                    assert change["artifactLocation"]["uri"]


def test_sarif_is_valid_against_the_official_schema(report):
    assert_valid_sarif(sarif.log(report))


def test_the_schema_check_is_not_vacuous(report):
    doc = sarif.log(report)
    doc["runs"][0]["results"][0]["level"] = "fatal"
    del doc["runs"][0]["tool"]["driver"]["name"]
    errors = list(sarif_validator().iter_errors(doc))
    assert len(errors) == 2


def _results(doc: dict) -> dict[str, dict]:
    return {r["properties"].get("key", "") or r["message"]["text"]: r for r in doc["runs"][0]["results"]}


def test_sarif_tree_files_are_relative_to_srcroot(report, inputs):
    doc = sarif.log(report)
    run = doc["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == Path(inputs["base"]).resolve().as_uri() + "/"
    r = _results(doc)["cupy.cuda.nccl"]
    phys = r["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": "src/pkg/mod.py", "uriBaseId": "%SRCROOT%"}
    assert phys["region"] == {"startLine": 2, "startColumn": 5, "endLine": 2, "endColumn": 19}
    assert r["level"] == "warning" and r["partialFingerprints"][sarif.FINGERPRINT_KEY] == report.findings[
        [f.key for f in report.findings].index("cupy.cuda.nccl")
    ].fingerprint()
    # the tree as a whole: its directory
    assert _results(doc)["tree"]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "src/",
        "uriBaseId": "%SRCROOT%",
    }


def test_sarif_fix_has_the_edit_as_a_replacement(report):
    r = _results(sarif.log(report))["cupy.cuda.nccl"]
    (fix,) = r["fixes"]
    assert fix["description"]["text"] == "import the submodule"
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "src/pkg/mod.py"
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 12},
            "insertedContent": {"text": "import cupy.cuda.nccl"},
        }
    ]
    assert r["properties"]["fix"] == {"description": "import the submodule", "applicability": "safe"}
    assert r["message"]["text"].endswith("\nFix: import the submodule")
    # A text-only fix is no SARIF fix (which needs artifactChanges), but is in the message and properties.
    lib = _results(sarif.log(report))["libcublas.so.12"]
    assert "fixes" not in lib and lib["properties"]["fix"]["applicability"] == "display"


def test_sarif_wheel_members_are_nested_artifacts(report, inputs):
    doc = sarif.log(report)
    arts = doc["runs"][0]["artifacts"]
    wheel_i = next(i for i, a in enumerate(arts) if a["location"]["uri"].endswith(".whl") and "missing" not in a["location"]["uri"])
    assert arts[wheel_i]["location"] == {"uri": f"dist/{inputs['wheel'].name}", "uriBaseId": "%SRCROOT%"}
    assert arts[wheel_i]["roles"] == ["analysisTarget"] and arts[wheel_i]["mimeType"] == "application/zip"
    r = _results(doc)["libcublas.so.12"]
    loc = r["locations"][0]
    i = loc["physicalLocation"]["artifactLocation"]["index"]
    assert loc["physicalLocation"]["artifactLocation"] == {"uri": "pkg/_ext.so", "index": i}
    assert arts[i] == {"location": {"uri": "pkg/_ext.so"}, "parentIndex": wheel_i}
    assert loc["logicalLocations"] == [
        {"name": "libcublas.so.12", "fullyQualifiedName": "pkg/_ext.so!libcublas.so.12", "kind": "module"}
    ]
    # a second finding on the same member reuses its artifact; a symbol is a function by default
    r2 = _results(doc)["cublasCreate_v2"]
    assert r2["locations"][0]["physicalLocation"]["artifactLocation"]["index"] == i
    assert r2["locations"][0]["logicalLocations"][0]["kind"] == "function"
    assert r2["level"] == "note"
    # member names are percent-encoded into URI references
    weird = _results(doc)["weird"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert unquote(weird["uri"]) == WEIRD_MEMBER and "<" not in weird["uri"] and " " not in weird["uri"]
    # the wheel as a whole: the archive itself
    whole = _results(doc)["wheel"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert whole["index"] == wheel_i and whole["uri"] == arts[wheel_i]["location"]["uri"]


def test_sarif_installed_files_are_relative_to_site_packages(report, inputs):
    doc = sarif.log(report)
    run = doc["runs"][0]
    assert run["originalUriBaseIds"]["SITE_PACKAGES"]["uri"] == inputs["site"].resolve().as_uri() + "/"
    r = _results(doc)["cudaMalloc"]
    loc = r["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"] == {"uri": "report_fixture_inst/_cuda.so", "uriBaseId": "SITE_PACKAGES"}
    assert loc["logicalLocations"][0]["kind"] == "function"  # stated by evidence["symbol_kind"]
    assert r["properties"]["origin"] == "probe"
    dist = _results(doc)["dist"]["locations"][0]
    assert dist["physicalLocation"]["artifactLocation"] == {"uri": "./", "uriBaseId": "SITE_PACKAGES"}
    assert dist["logicalLocations"] == [
        {"name": "report-fixture-inst", "fullyQualifiedName": "report-fixture-inst==2.0", "kind": "package"}
    ]


def test_sarif_outside_the_working_directory_uses_absolute_uris(inputs, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    doc = sarif.log(fixture_report(inputs))
    assert_valid_sarif(doc)
    loc = _results(doc)["cupy.cuda.nccl"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": (inputs["tree"] / "pkg" / "mod.py").resolve().as_uri()}
    assert urlsplit(loc["uri"]).scheme == "file"


def test_sarif_invocation_rules_and_notifications(report):
    doc = sarif.log(report)
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "cuaudit" and driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == ["CU001", "CU099"]  # only rules that appear
    cu099 = driver["rules"][1]
    assert cu099["name"] == "report-fixture" and cu099["defaultConfiguration"] == {"level": "warning"}
    assert cu099["help"]["markdown"].startswith("# CU099 `report-fixture`")
    assert "## Fix safety" in cu099["help"]["markdown"] and "```" not in cu099["help"]["text"]
    assert cu099["fullDescription"]["text"].startswith("Test-only")
    inv = run["invocations"][0]
    assert inv["exitCode"] == 1 and inv["executionSuccessful"] is True
    notes = inv["toolExecutionNotifications"]
    skipped = [n for n in notes if n["descriptor"]["id"] == "skipped"]
    assert len(skipped) == 1 and skipped[0]["message"]["text"] == "listed in RECORD but missing on disk"
    assert skipped[0]["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "report_fixture_inst/gone.py",
        "uriBaseId": "SITE_PACKAGES",
    }
    probes = [n for n in notes if n["descriptor"]["id"] == "probe"]
    assert probes[0]["properties"]["command"] == "python -c 'import report_fixture_inst'"
    assert driver["notifications"][skipped[0]["descriptor"]["index"]]["id"] == "skipped"
    assert driver["notifications"][probes[0]["descriptor"]["index"]]["id"] == "probe"
    missing = _results(doc)[next(k for k in _results(doc) if "does not exist" in k)]
    assert missing["ruleId"] == "CU001" and missing["level"] == "error"


def test_sarif_exit_code_follows_the_report(report):
    report.exit_zero = True
    assert sarif.log(report)["runs"][0]["invocations"][0]["exitCode"] == 0


def test_sarif_severity_override_changes_level_not_default(inputs, monkeypatch):
    monkeypatch.chdir(inputs["base"])
    rep = fixture_report(inputs, severity={"CU099": Severity.ERROR})
    doc = sarif.log(rep)
    assert _results(doc)["cupy.cuda.nccl"]["level"] == "error"
    assert doc["runs"][0]["tool"]["driver"]["rules"][1]["defaultConfiguration"]["level"] == "warning"


def test_sarif_of_an_empty_report_is_valid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rep = audit([], config=Config(select=("CU001",), cache=False))
    doc = sarif.log(rep)
    assert_valid_sarif(doc)
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []


# -- JSON: docs/schema/report-v1.json ------------------------------------------------------------


def report_validator() -> jsonschema.Validator:
    schema = json.loads(REPORT_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_valid_report(doc: dict) -> None:
    errors = list(report_validator().iter_errors(doc))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def test_json_is_valid_against_its_schema(report):
    doc = json.loads(json_report.render(report))
    assert_valid_report(doc)
    assert doc["summary"] == {
        "error": 3, "warning": 3, "info": 3, "total": 9, "suppressed": 0, "baselined": 0,
        "skipped": 1, "fail_on": "warning", "exit_code": 1,
    }
    assert doc["probes"] == [
        {"what": "import report_fixture_inst", "command": "python -c 'import report_fixture_inst'", "seconds": 0.25, "outcome": "ok"}
    ]


def test_json_with_environment_is_valid(report):
    report.environment = EnvironmentInfo(
        python="/opt/venv/bin/python", version="3.11.9", implementation="cpython", platform="linux-x86_64",
        prefix="/opt/venv", site_dirs=("/opt/venv/lib/python3.11/site-packages",),
        sys_path=("/opt/venv/lib/python3.11/site-packages",), environ={"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"},
    )
    doc = json.loads(json_report.render(report))
    assert_valid_report(doc)
    assert doc["environment"]["environ"] == {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}


def test_json_schema_rejects_what_it_should(report):
    doc = json.loads(json_report.render(report))
    doc["findings"][0]["severity"] = "fatal"
    doc["findings"][1]["location"]["line"] = 0
    doc["unexpected"] = 1
    assert len(list(report_validator().iter_errors(doc))) == 3


# -- text ----------------------------------------------------------------------------------


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_text_groups_by_artifact_and_member_with_a_summary_line(report, inputs):
    out = text.render(report, color=False)
    assert not ANSI.search(out)
    lines = out.splitlines()
    assert lines[-1].startswith("Found 9 findings (3 error, 3 warning, 3 info) in 4 artifacts [1 skipped")
    assert "1 probe ran audited code" in lines[-1]
    heads = [ln for ln in lines if ln and not ln.startswith(" ")][:-2]  # less the probes and summary
    # one heading per artifact with its kind and count; artifacts with errors first, then by path
    assert sorted(heads) == sorted([
        "report-fixture-wheel 1.0  (wheel, 4 findings)",  # name and version, not the file's path
        "report-fixture-inst 2.0  (installed, 2 findings)",
        "src  (tree, 2 findings)",  # paths under the working directory are shown relative
        "dist/missing-1.0-py3-none-any.whl  (file, 1 finding)",
    ])
    worst = {ref: max(f.severity for f in report.findings if f.location.artifact == ref) for ref in report.artifacts}
    shown_order = [next(r for r in report.artifacts if (r.name and h.startswith(r.name)) or r.path.endswith(h.split("  (")[0].split("/")[-1])) for h in heads]
    assert [worst[r] for r in shown_order] == sorted((worst[r] for r in shown_order), reverse=True)
    i = lines.index("  pkg/mod.py")
    assert lines[i + 1].startswith("    2:5 CU099 warning cupy.cuda.nccl")
    assert lines[i + 2] == "      fix: import the submodule [safe autofix]"
    assert "    CU099 error [libcublas.so.12] DT_NEEDED libcublas.so.12" in out
    # a fix with a user and a maintainer line shows both, labelled
    i = lines.index("    CU099 error [libcublas.so.12] DT_NEEDED libcublas.so.12 but no symbol of it is used")
    assert lines[i + 1 : i + 3] == ["      user fix: pip install nvidia-cublas-cu12",
                                    "      maintainer fix: link with -Wl,--as-needed"]
    assert "(probe)" in out  # findings confirmed by a probe say so


def test_text_tallies_info_findings_past_the_limit_unless_verbose(report, monkeypatch):
    monkeypatch.setattr(text, "INFO_LIST_LIMIT", 1)
    out = text.render(report, color=False)
    infos = [f for f in report.findings if str(f.severity) == "info"]
    assert f"{len(infos)} info findings not listed (CU099 \u00d7{len(infos)}); -v lists them." in out
    assert not any(f.message in out for f in infos if f.message not in {g.message for g in report.findings if g not in infos})
    verbose = text.render(report, color=False, verbose=True)
    assert "not listed" not in verbose and all(f.message.splitlines()[0] in verbose for f in infos)


def test_text_colour_only_when_asked(report):
    assert ANSI.search(text.render(report, color=True))
    assert not ANSI.search(text.render(report, color=False))


def test_text_does_not_interpret_markup_in_messages(report):
    out = text.render(report, color=False)
    assert "<script>alert('x')</script> 100% done, a:b" in out
    assert WEIRD_MEMBER in out


def test_text_lists_skipped_when_verbose(report):
    assert "listed in RECORD but missing on disk" not in text.render(report)
    assert "listed in RECORD but missing on disk" in text.render(report, verbose=True)


# -- GitHub annotations ---------------------------------------------------------------------


def test_github_annotations_escape_data_and_properties(report, inputs):
    out = github_report.render(report)
    lines = out.splitlines()
    assert len(lines) == len(report.findings)
    tree = next(ln for ln in lines if "cupy.cuda.nccl" in ln)
    assert tree.startswith("::warning file=src/pkg/mod.py,line=2,endLine=2,col=5,endColumn=19,title=CU099 report-fixture::")
    assert tree.endswith("%0AFix: import the submodule")
    hostile = next(ln for ln in lines if "alert" in ln)
    # no file (a wheel member): the location goes into the message; newline and % escaped
    assert hostile.startswith("::warning title=CU099 report-fixture::")
    # the newline inside the input's text is shown escaped, never a line of its own
    assert "100%25 done, a:b\\nsecond line" in hostile and "\n" not in hostile
    assert f"{WEIRD_MEMBER.replace('%', '%25')}:1:1" in hostile
    err = next(ln for ln in lines if "libcublas" in ln)
    assert err.startswith("::error ")
    info = next(ln for ln in lines if "cublasCreate_v2" in ln)
    assert info.startswith("::notice ")


def test_github_property_escaping():
    assert github_report._escape_prop("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"
    assert github_report._escape_data("a:b,c%d\r\ne") == "a:b,c%25d%0D%0Ae"


# -- HTML --------------------------------------------------------------------------------------


class _Collect(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_and_escapes_everything(report):
    out = html_report.render(report)
    assert out.startswith("<!DOCTYPE html>")
    parsed = _Collect()
    parsed.feed(out)
    assert "script" not in parsed.tags and "i" not in parsed.tags  # the hostile message and member name stay text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in out
    assert "we&lt;i&gt;rd&lt;/i&gt; name%,:.py" in out
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", out)  # nothing fetched from elsewhere
    assert "<link" not in out and "<script" not in out
    body = "".join(parsed.text)
    assert "Found 9 findings (3 error, 3 warning, 3 info)" in body


def test_html_shows_groups_evidence_fix_skipped_probes_environment(report):
    report.environment = EnvironmentInfo(
        python="/opt/venv/bin/python", version="3.11.9", implementation="cpython", platform="linux-x86_64",
        prefix="/opt/venv", site_dirs=("/opt/venv/lib/python3.11/site-packages",), sys_path=(),
        environ={"CUDA_HOME": "/usr/local/cuda"},
    )
    out = html_report.render(report)
    ctx = html_report.context(report)
    # artifacts with errors first (the tree has only a warning and an info), then in input order
    assert [g["kind"] for g in ctx["groups"]] == ["wheel", "installed distribution", "file", "source tree"]
    # within the wheel: by worst severity (error, warning, then the wheel's own info)
    assert [b["member"] for b in ctx["groups"][0]["blocks"]] == ["pkg/_ext.so", WEIRD_MEMBER, ""]
    assert ctx["groups"][0]["worst"] == "error" and ctx["groups"][0]["title"] == "report-fixture-wheel 1.0"
    assert 'class="artifact worst-error sevset-ewi"' in out and 'class="badge sev-info"' in out
    assert "&#34;chain&#34;: &#34;cupy.cuda.nccl&#34;" in out  # evidence, as escaped JSON
    assert "import cupy.cuda.nccl" in out and "safe automatic fix" in out
    assert "<span class=\"label\">User fix:</span> pip install nvidia-cublas-cu12" in out
    assert "<span class=\"label\">Maintainer fix:</span> link with -Wl,--as-needed" in out
    assert 'id="skipped"' in out and "listed in RECORD but missing on disk" in out
    assert 'id="probes"' in out and "python -c &#39;import report_fixture_inst&#39;" in out
    assert 'id="environment"' in out and "/usr/local/cuda" in out
    assert 'id="rule-CU099"' in out and 'href="#rule-CU099"' in out


def test_html_of_a_clean_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rep = audit([], config=Config(select=("CU001",), cache=False))
    out = html_report.render(rep)
    assert "No findings." in out and 'class="status pass"' in out and 'id="skipped"' not in out


# -- the CLI -------------------------------------------------------------------------------------


def _cli_args(inputs: dict[str, Path]) -> list[str]:
    return ["check", "src", f"dist/{inputs['wheel'].name}", "--select", "CU099", "--isolated", "--no-cache", "-j", "1"]


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "html"])
def test_cli_formats_and_exit_codes(cli, inputs, monkeypatch, fmt):
    monkeypatch.chdir(inputs["base"])
    rc, out, err = cli(*_cli_args(inputs), "--format", fmt)
    assert rc == 1, err
    if fmt == "json":
        doc = json.loads(out)
        assert_valid_report(doc)
        assert doc["summary"]["total"] == 6 and doc["summary"]["exit_code"] == 1
    elif fmt == "sarif":
        doc = json.loads(out)
        assert_valid_sarif(doc)
        assert len(doc["runs"][0]["results"]) == 6
    elif fmt == "html":
        assert out.startswith("<!DOCTYPE html>") and "6 findings" in out
    elif fmt == "github":
        assert len(out.splitlines()) == 6 and out.startswith("::")
    else:
        assert out.splitlines()[-1].startswith("Found 6 findings")
    # --exit-zero: status 0, and the machine-readable reports say so
    rc, out, _ = cli(*_cli_args(inputs), "--format", fmt, "--exit-zero")
    assert rc == 0
    if fmt == "json":
        assert json.loads(out)["summary"]["exit_code"] == 0
    if fmt == "sarif":
        assert json.loads(out)["runs"][0]["invocations"][0]["exitCode"] == 0
    # --fail-on error: only the wheel's error fails; --select of a clean input: 0
    rc, *_ = cli(*_cli_args(inputs), "--format", fmt, "--fail-on", "error")
    assert rc == 1
    rc, *_ = cli("check", "src", "--select", "CU099", "--isolated", "--no-cache", "--fail-on", "error", "--format", fmt)
    assert rc == 0


@pytest.mark.parametrize("fmt", ["json", "sarif", "html", "text"])
def test_cli_output_file(cli, inputs, monkeypatch, tmp_path, fmt):
    monkeypatch.chdir(inputs["base"])
    target = tmp_path / f"report.{fmt}"
    rc, out, err = cli(*_cli_args(inputs), "--format", fmt, "--output", str(target), "--color", "auto")
    assert rc == 1 and out == ""
    assert err.strip().startswith("Found 6 findings")  # the summary goes to stderr
    written = target.read_text(encoding="utf-8")
    if fmt == "json":
        assert_valid_report(json.loads(written))
    elif fmt == "sarif":
        assert_valid_sarif(json.loads(written))
    elif fmt == "text":
        assert not ANSI.search(written)  # a file never gets colour under --color auto


def test_cli_color_always_and_never(cli, inputs, monkeypatch):
    monkeypatch.chdir(inputs["base"])
    _, out, _ = cli(*_cli_args(inputs), "--color", "always")
    assert ANSI.search(out)
    _, out, _ = cli(*_cli_args(inputs), "--color", "never")
    assert not ANSI.search(out)
    _, out, _ = cli(*_cli_args(inputs))  # captured stdout is not a terminal
    assert not ANSI.search(out)


def test_cli_env_json_and_sarif_validate(cli, monkeypatch, tmp_path):
    """A real `cuaudit env` report (this interpreter's environment) against both schemas."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("env", "--select", "CU001", "--isolated", "--no-cache", "--format", "json", "--exit-zero")
    assert rc == 0, err
    doc = json.loads(out)
    assert_valid_report(doc)
    assert doc["command"] == "env" and doc["environment"]["site_dirs"]
    assert any(i["name"] == "jsonschema" for i in doc["inputs"])
    rc, out, err = cli("env", "--select", "CU001", "--isolated", "--no-cache", "--format", "sarif", "--exit-zero")
    assert_valid_sarif(json.loads(out))


# -- the real corpus ---------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("pattern", ["fastrlock-0.8.3-*.whl", "torch_linear_assignment-0.0.5.tar.gz", "rmm_cu12-24.12.0-*.whl"])
def test_corpus_reports_validate(cli, corpus, monkeypatch, tmp_path, pattern):
    """Every rule (whatever families are installed) on real artifacts: both schemas hold."""
    artifact = corpus_file(corpus, pattern)
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli("check", str(artifact), "--isolated", "--format", "sarif", "--exit-zero", "-j", "1")
    assert rc == 0, err
    doc = json.loads(out)
    assert_valid_sarif(doc)
    arts = doc["runs"][0]["artifacts"]
    assert arts[0]["location"]["uri"] == artifact.resolve().as_uri()  # outside the working directory
    rc, out, err = cli("check", str(artifact), "--isolated", "--format", "json", "--exit-zero", "-j", "1")
    assert_valid_report(json.loads(out))
    rc, out, err = cli("check", str(artifact), "--isolated", "--format", "html", "--exit-zero", "-j", "1")
    assert out.startswith("<!DOCTYPE html>")

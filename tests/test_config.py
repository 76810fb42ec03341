"""Configuration: defaults < [tool.cuaudit] < CUAUDIT_* < command line, and every key's effect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_tree
from marker_rules import INFO, WARN, marker_rules, only_cu0  # noqa: F401 - fixture

from cuaudit import audit
from cuaudit import config as cfg
from cuaudit.config import Config, ConfigError
from cuaudit.model import Severity

PYPROJECT = """
[project]
name = "demo"

[tool.cuaudit]
select = ["CU0", "CU1"]
ignore = ["CU011"]
fail-on = "error"
target-archs = ["sm_80", "sm_90"]
exclude = ["build/*"]
jobs = 3
probe-timeout = 5

[tool.cuaudit.severity]
CU0 = "warning"
CU001 = "info"

[tool.cuaudit.per-path-ignores]
"tests/*" = ["CU1"]

[tool.cuaudit.allow]
preload-libraries = ["libtorch_global_deps.so"]

[tool.cuaudit.input]
some-option = 7
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults():
    c = cfg.load(isolated=True, environ={})
    assert c.select == ("ALL",) and c.ignore == () and c.fail_on is Severity.WARNING
    assert c.cache and c.cache_dir is None and not c.probe and c.probe_timeout == 60.0 and c.jobs == 0
    assert c.target_archs == () and c.allowed("x") == () and c.section("linkage") == {}
    assert c.source == "defaults"


def test_pyproject_table_sets_every_kind_of_key(tmp_path):
    write(tmp_path / "pyproject.toml", PYPROJECT)
    sub = tmp_path / "src" / "deep"
    sub.mkdir(parents=True)
    c = cfg.load(start=str(sub), environ={})  # found upward from a subdirectory
    assert c.select == ("CU0", "CU1") and c.ignore == ("CU011",)
    assert c.fail_on is Severity.ERROR and c.target_archs == ("sm_80", "sm_90") and c.exclude == ("build/*",)
    assert c.jobs == 3 and c.probe_timeout == 5.0
    assert c.severity_for("CU001", Severity.ERROR) is Severity.INFO  # the longest prefix wins
    assert c.severity_for("CU002", Severity.ERROR) is Severity.WARNING
    assert c.severity_for("CU201", Severity.ERROR) is Severity.ERROR
    assert c.per_path_ignores == {"tests/*": ("CU1",)}
    assert c.allowed("preload-libraries") == ("libtorch_global_deps.so",)
    assert c.section("input") == {"some-option": 7}
    assert c.source == str(tmp_path / "pyproject.toml")


def test_pyproject_without_cuaudit_table_is_skipped_for_the_next_one_up(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.cuaudit]\nfail-on = "info"\n')
    write(tmp_path / "inner" / "pyproject.toml", '[project]\nname = "inner"\n')
    assert cfg.load(start=str(tmp_path / "inner"), environ={}).fail_on is Severity.INFO


def test_precedence_defaults_pyproject_environment_command_line(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.cuaudit]\nfail-on = "error"\nselect = ["CU0"]\njobs = 2\n')
    start = str(tmp_path)
    assert cfg.load(start=start, environ={}).fail_on is Severity.ERROR
    env = {"CUAUDIT_FAIL_ON": "info", "CUAUDIT_SELECT": "CU1,CU2", "CUAUDIT_CACHE": "false"}
    c = cfg.load(start=start, environ=env)
    assert c.fail_on is Severity.INFO and c.select == ("CU1", "CU2") and c.cache is False and c.jobs == 2
    c = cfg.load(start=start, environ=env, overrides={"fail-on": "warning", "select": None, "jobs": 1})
    assert c.fail_on is Severity.WARNING and c.select == ("CU1", "CU2") and c.jobs == 1
    assert c.source == f"{tmp_path / 'pyproject.toml'} + environment (CUAUDIT_*) + command line"
    # --isolated drops the file but keeps the environment and the command line
    c = cfg.load(start=start, isolated=True, environ=env)
    assert c.fail_on is Severity.INFO and c.jobs == 0


def test_every_documented_environment_variable_is_read():
    env = {
        "CUAUDIT_SELECT": "CU2", "CUAUDIT_IGNORE": "CU201", "CUAUDIT_EXTEND_SELECT": "CU3",
        "CUAUDIT_EXTEND_IGNORE": "CU301", "CUAUDIT_FAIL_ON": "error", "CUAUDIT_TARGET_ARCHS": "sm_80, sm_90",
        "CUAUDIT_EXCLUDE": "build/*", "CUAUDIT_BASELINE": "b.json", "CUAUDIT_JOBS": "4", "CUAUDIT_CACHE": "0",
        "CUAUDIT_CACHE_DIR": "/tmp/x", "CUAUDIT_PROBE": "yes", "CUAUDIT_PROBE_TIMEOUT": "2.5",
        "CUAUDIT_CACHE_MAX_SIZE": "2GB",
    }
    c = cfg.load(isolated=True, environ=env)
    assert (c.select, c.ignore, c.extend_select, c.extend_ignore) == (("CU2",), ("CU201",), ("CU3",), ("CU301",))
    assert c.selected == ("CU2", "CU3") and c.ignored == ("CU201", "CU301")
    assert c.fail_on is Severity.ERROR and c.target_archs == ("sm_80", "sm_90") and c.exclude == ("build/*",)
    assert c.baseline == "b.json" and c.jobs == 4 and c.cache is False and c.cache_dir == "/tmp/x"
    assert c.probe is True and c.probe_timeout == 2.5 and c.cache_max_size == 2 * 1024**3
    assert set(cfg.ENV_KEYS) == {k[len("CUAUDIT_"):].lower().replace("_", "-") for k in env}


@pytest.mark.parametrize(
    "text, message",
    [
        ('[tool.cuaudit]\nselcet = ["CU1"]\n', "unknown key 'selcet'"),
        ('[tool.cuaudit.nosuchfamily]\nx = 1\n', "unknown table [tool.cuaudit.nosuchfamily]"),
        ('[tool.cuaudit]\nselect = 3\n', "'select' must be a list of strings"),
        ('[tool.cuaudit]\nselect = ["E501"]\n', "not a rule code or prefix"),
        ('[tool.cuaudit]\nfail-on = "fatal"\n', "unknown severity 'fatal'"),
        ('[tool.cuaudit]\njobs = "many"\n', "'jobs' must be an integer"),
        ('[tool.cuaudit]\njobs = -1\n', "'jobs' must be an integer >= 0"),
        ('[tool.cuaudit]\nprobe-timeout = 0\n', "'probe-timeout' must be a positive number"),
        ('[tool.cuaudit]\ncache = "maybe"\n', "'cache' must be true or false"),
        ('[tool.cuaudit]\ntarget-archs = ["ampere"]\n', "not a GPU architecture"),
        ('[tool.cuaudit.severity]\nCU1 = "loud"\n', "unknown severity 'loud'"),
        ('[tool.cuaudit]\nper-path-ignores = ["x"]\n', "'per-path-ignores' must be a table"),
        ('[tool.cuaudit\nselect = []\n', "not valid TOML"),
        ('[tool]\ncuaudit = 3\n', "[tool.cuaudit] must be a table"),
        # validated against what the rules declare (issue 11): typos, strings for lists, unknown archs, no match
        ('[tool.cuaudit.linkage]\nwiht = ["x.whl"]\n', "unknown option 'wiht' (did you mean 'with'?)"),
        ('[tool.cuaudit.linkage]\nwith = "x.whl"\n', "'linkage.with' must be a list of strings"),
        ('[tool.cuaudit.linkgae]\nwith = []\n', "unknown table [tool.cuaudit.linkgae] (did you mean 'linkage'?)"),
        ('[tool.cuaudit]\nselect = "CU2"\n', "'select' must be a list of strings, like select = [\"CU2\"]"),
        ('[tool.cuaudit]\ntarget-archs = ["sm_900"]\n', "'sm_900', which is not a GPU architecture"),
        ('[tool.cuaudit]\ntarget-archs = ["sm_80a"]\n', "not a GPU architecture"),
        ('[tool.cuaudit]\nselect = ["CU9"]\n', "'select' has 'CU9', which matches no rule"),
        ('[tool.cuaudit]\nignore = ["CU2011"]\n', "'ignore' has 'CU2011'"),
        ('[tool.cuaudit.per-path-ignores]\n"tests/*" = ["CU77"]\n', "matches no rule"),
        ('[tool.cuaudit.allow]\npreload-libs = ["x.so"]\n', "unknown allow-list 'allow.preload-libs' (did you mean 'preload-libraries'?)"),
        ('[tool.cuaudit]\nselcet = ["CU1"]\n', "(did you mean 'select'?)"),
    ],
)
def test_bad_configuration_is_a_usage_error_naming_the_key(tmp_path, text, message, cli):
    from cuaudit.rules import validate_config

    path = write(tmp_path / "pyproject.toml", text)
    with pytest.raises(ConfigError) as exc:
        validate_config(cfg.load(config_file=str(path), environ={}))
    assert message in str(exc.value) and str(path) in str(exc.value)
    (tmp_path / "t").mkdir()
    rc, out, err = cli("check", str(tmp_path / "t"), "--config", str(path), "--no-cache")
    assert rc == 2 and out == "" and message in err and err.startswith("cuaudit: error:")


def test_bad_environment_value_names_the_variable(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("CUAUDIT_FAIL_ON", "sometimes")
    rc, _, err = cli("check", str(tmp_path), "--isolated")
    assert rc == 2 and "environment (CUAUDIT_*): 'fail-on'" in err


def test_missing_config_file_is_a_usage_error(cli, tmp_path):
    rc, _, err = cli("check", str(tmp_path), "--config", str(tmp_path / "nope.toml"))
    assert rc == 2 and "nope.toml" in err


def test_discovered_pyproject_with_bad_toml_is_exit_2(cli, tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", "[tool.cuaudit]\nselect = [\n")
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli("check", "--no-cache")
    assert rc == 2 and "not valid TOML" in err


# -- the effect of each key on an audit ----------------------------------------------------------------


@pytest.fixture
def marked_tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "proj", {
        "pkg/a.py": f"a = 1  # {WARN}\nb = 2  # {INFO}\n",
        "tests/test_a.py": f"c = 3  # {WARN}\n",
    })


def _run(tree: Path, **kw) -> list[tuple[str, str, str]]:
    report = audit([str(tree)], config=only_cu0(cache=False, **kw))
    return [(f.code, f.location.member, str(f.severity)) for f in report.findings]


def test_select_and_ignore_by_prefix_longest_wins(marked_tree, marker_rules):
    both = [("CU098", "pkg/a.py", "warning"), ("CU097", "pkg/a.py", "info"), ("CU098", "tests/test_a.py", "warning")]
    assert sorted(_run(marked_tree)) == sorted(both)
    assert _run(marked_tree, select=("CU097",)) == [("CU097", "pkg/a.py", "info")]
    assert {c for c, _, _ in _run(marked_tree, select=("CU09",), ignore=("CU098",))} == {"CU097"}
    # the longer (more specific) prefix wins, whichever list it is in
    assert {c for c, _, _ in _run(marked_tree, select=("CU098",), ignore=("CU09",))} == {"CU098"}
    assert {c for c, _, _ in _run(marked_tree, select=("ALL",), ignore=("CU0",))} == set()
    assert {c for c, _, _ in _run(marked_tree, select=("CU097",), extend_select=("CU098",))} == {"CU097", "CU098"}


def test_per_path_ignores(marked_tree, marker_rules):
    got = _run(marked_tree, per_path_ignores={"tests/*": ("CU09",)})
    assert sorted(got) == [("CU097", "pkg/a.py", "info"), ("CU098", "pkg/a.py", "warning")]


def test_severity_overrides_longest_prefix(marked_tree, marker_rules):
    got = _run(marked_tree, severity={"CU09": Severity.ERROR, "CU097": Severity.WARNING})
    assert sorted(got) == [("CU097", "pkg/a.py", "warning"), ("CU098", "pkg/a.py", "error"),
                           ("CU098", "tests/test_a.py", "error")]


def test_fail_on_threshold(marked_tree, marker_rules):
    info_only = audit([str(marked_tree)], config=only_cu0(cache=False, select=("CU097",)))
    assert info_only.exit_code() == 0  # default threshold: warning
    assert audit([str(marked_tree)], config=only_cu0(cache=False, select=("CU097",), fail_on=Severity.INFO)).exit_code() == 1
    warn = audit([str(marked_tree)], config=only_cu0(cache=False, fail_on=Severity.ERROR))
    assert warn.findings and warn.exit_code() == 0


def test_exclude_globs(marked_tree, marker_rules):
    assert {m for _, m, _ in _run(marked_tree, exclude=("tests",))} == {"pkg/a.py"}
    assert {m for _, m, _ in _run(marked_tree, exclude=("tests/*.py",))} == {"pkg/a.py"}


def test_cli_flags_override_pyproject_and_environment(marked_tree, marker_rules, cli, monkeypatch):
    write(marked_tree / "pyproject.toml", '[tool.cuaudit]\nselect = ["CU098"]\nfail-on = "error"\n'
          '[tool.cuaudit.per-path-ignores]\n"tests/*" = ["CU098"]\n')
    monkeypatch.chdir(marked_tree)
    rc, out, _ = cli("check", "--no-cache", "-f", "json")
    assert rc == 0 and [f["code"] for f in json.loads(out)["findings"]] == ["CU098"]
    monkeypatch.setenv("CUAUDIT_FAIL_ON", "warning")
    rc, out, _ = cli("check", "--no-cache", "-f", "json")
    assert rc == 1
    rc, out, _ = cli("check", "--no-cache", "-f", "json", "--select", "CU097", "--fail-on", "info")
    assert rc == 1 and [f["code"] for f in json.loads(out)["findings"]] == ["CU097"]
    rc, out, _ = cli("check", "--no-cache", "-f", "json", "--isolated")
    assert len(json.loads(out)["findings"]) == 3
    rc, out, _ = cli("check", "--no-cache", "-f", "json", "--target-arch", "sm_80,sm_90a", "--exit-zero")
    assert rc == 0
    rc, out, _ = cli("check", "--no-cache", "-f", "json", "--isolated", "--exclude", "tests,nothing")
    assert {f["location"]["member"] for f in json.loads(out)["findings"]} == {"pkg/a.py"}
    rc, _, err = cli("check", "--no-cache", "--target-arch", "volta")
    assert rc == 2 and "not a GPU architecture" in err


def test_target_archs_are_validated_and_normalised():
    c = cfg.load(isolated=True, environ={"CUAUDIT_TARGET_ARCHS": "SM_80, sm_90a,compute_90"})
    assert c.target_archs == ("sm_80", "sm_90a", "compute_90")


def test_configuration_doc_lists_every_key_variable_and_flag():
    from conftest import REPO

    from cuaudit.cli import build_parser

    doc = (REPO / "docs" / "configuration.md").read_text()
    for key in sorted(cfg._LIST_KEYS | cfg._SCALAR_KEYS | cfg._TABLE_KEYS):
        assert f"`{key}`" in doc, key
    for key in cfg.ENV_KEYS:
        assert "CUAUDIT_" + key.upper().replace("-", "_") in doc, key
    check = build_parser()._subparsers._group_actions[0].choices["check"]
    for action in check._actions:
        long = [o for o in action.option_strings if o.startswith("--")]
        if long and long[0] != "--help":
            assert long[0] in doc, long[0]


def test_paths_in_pyproject_are_relative_to_the_file(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.cuaudit]\nbaseline = "ci/baseline.json"\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    c = cfg.load(environ={})
    assert c.baseline == str(tmp_path / "ci" / "baseline.json")
    # on the command line and in the environment they are relative to the working directory, as usual
    assert cfg.load(environ={"CUAUDIT_BASELINE": "b.json"}).baseline == "b.json"


def test_refreshing_the_configured_baseline_keeps_what_it_accepted(tmp_path, monkeypatch, cli, marker_rules):
    tree = make_tree(tmp_path / "proj", {"a.py": f"# {WARN}\n"})
    write(tree / "pyproject.toml", '[tool.cuaudit]\nselect = ["CU0"]\nbaseline = "baseline.json"\n')
    monkeypatch.chdir(tree)
    assert cli("check", "--no-cache", "--write-baseline", "baseline.json")[0] == 0
    assert cli("check", "--no-cache")[0] == 0  # accepted
    (tree / "b.py").write_text(f"# {WARN}\n")
    rc, _, err = cli("check", "--no-cache", "--write-baseline", "baseline.json")
    assert rc == 0 and "wrote 2 findings" in err  # the accepted one is kept, the new one added
    assert cli("check", "--no-cache")[0] == 0


def test_all_in_severity_and_suppressions():
    from cuaudit.facts.suppressions import parse_suppressions

    c = cfg.load(isolated=True, environ={}, overrides={})
    c = cfg.apply(c, {"severity": {"ALL": "info", "CU2": "error"}}, "test")
    assert c.severity_for("CU101", Severity.WARNING) is Severity.INFO
    assert c.severity_for("CU201", Severity.WARNING) is Severity.ERROR
    assert parse_suppressions("x  # cuaudit: ignore[ALL]\n").silences(1, "CU601")


def test_library_audit_validates_the_configuration_too():
    import cuaudit
    from cuaudit.config import Config

    with pytest.raises(ConfigError, match="matches no rule"):
        cuaudit.audit([], config=Config(select=("CU9",)))


def test_every_declared_family_option_is_documented():
    """A family's OPTIONS and ALLOW_LISTS are data; docs/configuration.md names each."""
    from pathlib import Path

    from cuaudit.rules import allow_lists, family_options

    doc = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    names = [n for opts in family_options().values() for n in opts] + list(allow_lists())
    assert names and all(n in doc for n in names), [n for n in names if n not in doc]

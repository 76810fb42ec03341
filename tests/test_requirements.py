"""``cuaudit check -r requirements.txt`` / ``pylock.toml``: the pinned set audited together before install.

The download cache is filled here with the wheels (the path `NAME==VERSION`
inputs use), so nothing is fetched from the network.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest

from conftest import corpus_file, make_wheel
from cuaudit.inputs.index import download_dir
from cuaudit.inputs.requirements import read_pinned


def seed(cache_dir: str, spec: str, wheel) -> None:
    dest = download_dir(spec, cache_dir)
    os.makedirs(dest, exist_ok=True)
    shutil.copy(wheel, dest)


def test_read_requirements_pins_and_skips(tmp_path):
    (tmp_path / "base.txt").write_text("numpy==2.0.2\n")
    req = tmp_path / "requirements.txt"
    req.write_text(textwrap.dedent("""\
        # comment
        -r base.txt
        --index-url https://example.invalid/simple
        cupy-cuda12x==13.3.0 --hash=sha256:abc
        rmm-cu12[test]==24.12.0 ; python_version >= "3"
        never==1.0 ; python_version < "3"
        torch>=2.0
        -e ./src
        pkg @ https://example.invalid/pkg.whl
        """))
    ps = read_pinned(str(req))
    assert [spec for _l, spec in ps.pins] == ["numpy==2.0.2", "cupy-cuda12x==13.3.0", "rmm-cu12==24.12.0"]
    reasons = {s.location.line: s.reason for s in ps.skipped}
    assert sorted(reasons) == [7, 8, 9]
    assert "not pinned to one version" in reasons[7] and "editable" in reasons[8] and "direct URL" in reasons[9]


def test_pylock_packages(tmp_path):
    lock = tmp_path / "pylock.toml"
    lock.write_text(textwrap.dedent("""\
        lock-version = "1.0"
        created-by = "test"
        [[packages]]
        name = "rmm-cu12"
        version = "24.12.0"
        [[packages]]
        name = "local"
        directory = {path = "./local"}
        [[packages]]
        name = "winonly"
        version = "1.0"
        marker = "sys_platform == 'win32'"
        """))
    ps = read_pinned(str(lock))
    assert [spec for _l, spec in ps.pins] == ["rmm-cu12==24.12.0"]
    assert len(ps.skipped) == 1 and "no version" in ps.skipped[0].reason


def test_pinned_set_is_audited_together(cli, tmp_path):
    cache = os.environ["CUAUDIT_CACHE_DIR"]
    # the pinned line is fetched (from the seeded cache) and audited; the range is skipped with its line
    a = make_wheel(tmp_path, "reqdemo-a", "1.0", {"reqdemo_a/__init__.py": "import reqdemo_b.sub\n"})
    seed(cache, "reqdemo-a==1.0", a)
    req = tmp_path / "requirements.txt"
    req.write_text("reqdemo-a==1.0\nreqdemo-b>=2\n")
    rc, out, _ = cli("check", "-r", req, "--format", "json", "--isolated")
    doc = json.loads(out)
    assert [i["name"] or i["path"] for i in doc["inputs"]] == ["reqdemo-a"]
    (skip,) = doc["skipped"]
    assert skip["location"]["line"] == 2 and "reqdemo-b>=2" in skip["reason"]


@pytest.mark.corpus
def test_requirements_with_a_broken_capi_pair(corpus, cli, tmp_path):
    cache = os.environ["CUAUDIT_CACHE_DIR"]
    seed(cache, "rmm-cu12==24.12.0", corpus_file(corpus, "rmm_cu12-24.12.0-*.whl"))
    seed(cache, "cuda-python==12.6.1", corpus_file(corpus, "cuda_python-12.6.1-*.whl"))
    req = tmp_path / "requirements.txt"
    req.write_text("rmm-cu12==24.12.0\ncuda-python==12.6.1\n")
    rc, out, _ = cli("check", "-r", req, "--select", "CU3", "--format", "json", "--isolated")
    doc = json.loads(out)
    assert rc == 1 and [f["code"] for f in doc["findings"]] == ["CU301"]
    assert doc["findings"][0]["location"]["member"].startswith("rmm/pylibrmm/device_buffer")


def test_skipped_requirements_validate_against_the_report_schema(cli, tmp_path):
    import jsonschema

    from conftest import REPO

    req = tmp_path / "requirements.txt"
    req.write_text("torch>=2\n")
    _rc, out, _ = cli("check", "-r", req, "--format", "json", "--isolated")
    schema = json.loads((REPO / "docs" / "schema" / "report-v1.json").read_text())
    jsonschema.validate(json.loads(out), schema)

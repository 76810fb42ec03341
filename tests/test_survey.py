"""cuaudit survey: spec, index listing (a loopback fake index), the Dask run, the store and its reports."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import signal
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import corpus_file, make_wheel
from cuaudit.model import ConfigError
from cuaudit.survey.index import ReleaseFile, choose_wheel, download, list_files, platform_tags, releases, yanked_versions
from cuaudit.survey.spec import parse_spec

pytest.importorskip("distributed")


# -- spec ----------------------------------------------------------------------------------


def _times(*pairs):
    return {v: dt.datetime.fromisoformat(t + "T00:00:00+00:00") for v, t in pairs}


RELEASES = _times(("1.0", "2024-01-01"), ("1.1", "2024-03-01"), ("2.0rc1", "2024-05-01"), ("2.0", "2024-06-01"),
                  ("2.1", "2024-09-01"))


def test_spec_selects_lists_ranges_last_and_since():
    spec = parse_spec({"packages": {
        "Plain_Name": ["1.1", "2.0rc1"],
        "ranged": ">=1.1,<2.1",
        "newest": {"last": 2},
        "recent": {"since": "2024-05-15"},
        "both": {"versions": "<2.1", "last": 1, "prereleases": True},
    }})
    got = {s.name: s.choose(RELEASES) for s in spec.packages}
    assert got == {
        "plain-name": ["1.1", "2.0rc1"],  # an explicit pre-release is taken
        "ranged": ["1.1", "2.0"],  # pre-releases are not, by default
        "newest": ["2.0", "2.1"],
        "recent": ["2.0", "2.1"],
        "both": ["2.0"],
    }
    assert spec.platform == "cp311-manylinux_x86_64"


@pytest.mark.parametrize("packages, message", [
    ({"x": {"last": 0}}, "packages.x.last"),
    ({"x": "not a range"}, "neither a list of versions nor a PEP 440 range"),
    ({"x": {"since": "yesterday"}}, "packages.x.since"),
    ({"x": {"newest": 3}}, "unknown key"),
    ({"x": ["1.0"], "X": ["2.0"]}, "named twice"),
    ({}, "at least one package"),
])
def test_spec_errors_name_the_key(packages, message):
    with pytest.raises(ConfigError, match=message):
        parse_spec({"packages": packages})


def test_since_without_upload_times_is_a_usage_error():
    spec = parse_spec({"packages": {"x": {"since": "2024-01-01"}}})
    with pytest.raises(ConfigError, match="upload times"):
        spec.packages[0].choose({"1.0": None})


# -- the fake index --------------------------------------------------------------------------


class FakeIndex:
    """A loopback PEP 691 (JSON) / PEP 503 (HTML) index serving wheels from a folder."""

    def __init__(self, folder: Path, uploads: dict[str, str]) -> None:
        self.folder, self.uploads, self.requests = folder, uploads, []
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # noqa: D401 - quiet
                pass

            def do_GET(self):
                index.requests.append(self.path)
                if self.path.startswith("/files/"):
                    data = (index.folder / self.path[len("/files/"):]).read_bytes()
                    return self._send(data, "application/octet-stream")
                name = self.path.strip("/").split("/")[-1]
                files = [f for f in sorted(index.folder.iterdir()) if f.name.startswith(name.replace("-", "_") + "-")]
                if not files:
                    self.send_error(404)
                    return
                if "json" in (self.headers.get("Accept") or ""):
                    doc = {"meta": {"api-version": "1.1"}, "name": name, "files": [
                        {"filename": f.name, "url": f"/files/{f.name}", "size": f.stat().st_size,
                         "hashes": {"sha256": hashlib.sha256(f.read_bytes()).hexdigest()},
                         "upload-time": index.uploads.get(f.name, "2024-01-01T00:00:00Z")} for f in files]}
                    return self._send(json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json")
                links = "".join(f'<a href="/files/{f.name}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">'
                                f"{f.name}</a>" for f in files)
                return self._send(f"<html><body>{links}</body></html>".encode(), "text/html")

            def _send(self, data: bytes, ctype: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/simple"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


CAN_CAST = "import numpy\n\n\ndef fits():\n    return numpy.can_cast(300, numpy.uint8)\n"


@pytest.fixture
def tiny_index(tmp_path: Path):
    """tinyprov 1.0 (clean), 1.1 (a NumPy 2 error: CU402), 2.0 (fixed); tinyuser 1.0 requires tinyprov>=1.0."""
    folder = tmp_path / "files"
    folder.mkdir()
    for version, body in (("1.0", "def fits():\n    return True\n"), ("1.1", CAN_CAST), ("2.0", "X = 1\n")):
        make_wheel(folder, "tinyprov", version, {"tinyprov/__init__.py": body}, requires=["numpy>=2"])
    # the same release for another platform and an older tag: the survey takes the one wheel that fits
    make_wheel(folder, "tinyprov", "1.1", {"tinyprov/__init__.py": CAN_CAST}, tag="cp311-cp311-win_amd64")
    make_wheel(folder, "tinyuser", "1.0", {"tinyuser/__init__.py": "import tinyprov\n"}, requires=["tinyprov>=1.0"])
    uploads = {"tinyprov-1.0-py3-none-any.whl": "2023-01-01T00:00:00Z", "tinyprov-2.0-py3-none-any.whl": "2025-01-02T00:00:00Z"}
    index = FakeIndex(folder, uploads)
    yield index
    index.close()


def test_listing_json_and_html_agree_and_json_has_upload_times(tiny_index):
    json_files = list_files(tiny_index.url, "TinyProv")
    assert sorted({f.version for f in json_files}) == ["1.0", "1.1", "2.0"]
    assert releases(json_files)["1.0"] == dt.datetime(2023, 1, 1, tzinfo=dt.timezone.utc)
    assert all(f.url.startswith("http://127.0.0.1") and len(f.sha256) == 64 for f in json_files)
    import cuaudit.survey.index as idx

    html = idx._parse("tinyprov", tiny_index.url + "/tinyprov/",
                      b'<a href="../../files/tinyprov-1.0-py3-none-any.whl#sha256=ab">x</a>'
                      b'<a href="../../files/tinyprov-0.9-py3-none-any.whl" data-yanked="">y</a>', "html")
    assert [(f.version, f.sha256, f.yanked) for f in html] == [("1.0", "ab", False), ("0.9", "", True)]
    assert releases(html) == {"1.0": None, "0.9": None}  # a yanked release is surveyed (and marked)
    assert yanked_versions(html) == {"0.9"}


def test_file_index_as_pip_reads_it(tmp_path: Path):
    wheel = make_wheel(tmp_path, "tinyprov", "1.0", {"tinyprov/__init__.py": ""})
    page = tmp_path / "simple" / "tinyprov"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>')
    files = list_files((tmp_path / "simple").as_uri(), "tinyprov")
    assert [(f.version, f.filename) for f in files] == [("1.0", wheel.name)]
    assert download(files[0], str(tmp_path / "dl")).path == str(wheel)  # a local file is read in place


def test_choose_wheel_takes_the_best_tag_of_the_target():
    def rf(name):
        return ReleaseFile("x", "1.0", name, "u")

    files = [rf("x-1.0-cp311-cp311-win_amd64.whl"), rf("x-1.0-cp310-cp310-manylinux2014_x86_64.whl"),
             rf("x-1.0-py3-none-any.whl"), rf("x-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
             rf("x-1.0.tar.gz")]
    assert choose_wheel(files, platform_tags("cp311-manylinux_x86_64")).filename.startswith("x-1.0-cp311-cp311-many")
    assert choose_wheel(files, platform_tags("cp312-manylinux_aarch64")).filename == "x-1.0-py3-none-any.whl"
    assert choose_wheel(files, platform_tags("cp311-win_amd64")).filename == "x-1.0-cp311-cp311-win_amd64.whl"
    with pytest.raises(ConfigError, match="PYTAG-PLATFORM"):
        platform_tags("manylinux")


def test_download_checks_the_hash(tiny_index, tmp_path: Path):
    f = list_files(tiny_index.url, "tinyprov")[0]
    got = download(f, str(tmp_path / "dl"))
    assert got.bytes_fetched == f.size and Path(got.path).read_bytes()[:2] == b"PK"
    assert download(f, str(tmp_path / "dl")).bytes_fetched == 0  # cached
    import dataclasses

    bad = dataclasses.replace(f, sha256="0" * 64)
    with pytest.raises(OSError, match="sha256"):
        download(bad, str(tmp_path / "other"))
    assert not list((tmp_path / "other").iterdir())  # nothing half-written is left for a later run


# -- end to end: a real local Dask cluster on loopback ---------------------------------------


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def _rows(db: Path, sql: str):
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchall()


def test_survey_end_to_end_on_a_local_cluster(tiny_index, tmp_path: Path, cli):
    spec = _spec(tmp_path, f'[survey]\nindex-url = "{tiny_index.url}"\n'
                           '[packages]\ntinyprov = ">=1.0"\ntinyuser = { since = "2023-06-01" }\n')
    db = tmp_path / "s.sqlite3"
    rc, out, err = cli("survey", spec, "--db", db, "--workers", "2", "--format", "json")
    doc = json.loads(out)
    assert rc == 1  # a regression
    assert sorted((r["package"], r["version"]) for r in doc["releases"]) == [
        ("tinyprov", "1.0"), ("tinyprov", "1.1"), ("tinyprov", "2.0"), ("tinyuser", "1.0")]
    # the manylinux/any wheel, never the Windows one
    assert all(r["filename"].endswith("py3-none-any.whl") for r in doc["releases"])
    assert [(g["package"], g["version"], g["previous"], g["kind"], g["summary"]) for g in doc["regressions"]] == [
        ("tinyprov", "1.1", "1.0", "new-error", "1 new CU402 error")]
    assert doc["regressions"][0]["breaks"] == ["tinyuser 1.0: requires tinyprov>=1.0, which admits 1.1"]
    assert "[4/4]" in err and "releases selected" in err
    assert doc["run"]["releases"] == 4 and doc["run"]["workers"] == 2
    # the store: facts per wheel, the schema version, download time apart from audit time
    assert _rows(db, "SELECT value FROM meta WHERE key='schema_version'") == [("1",)]
    assert _rows(db, "SELECT r.version, f.code FROM findings f JOIN wheels w ON w.id=f.wheel_id "
                     "JOIN releases r ON r.id=w.release_id WHERE f.code='CU402'") == [("1.1", "CU402")]
    assert sorted(_rows(db, "SELECT requirement FROM requirements")) == [("numpy>=2",)] * 3 + [("tinyprov>=1.0",)]
    assert all(d >= 0 and a > 0 for d, a in _rows(db, "SELECT download_seconds, audit_seconds FROM wheels"))
    # a second run audits nothing new and reports the same
    requests = len(tiny_index.requests)
    rc2, out2, err2 = cli("survey", spec, "--db", db, "--format", "json")
    assert "0 to audit" in err2 and json.loads(out2)["regressions"] == doc["regressions"]
    assert not [r for r in tiny_index.requests[requests:] if r.startswith("/files/")]
    assert _rows(db, "SELECT count(*) FROM wheels") == [(4,)]


def test_report_only_html_and_text(tiny_index, tmp_path: Path, cli):
    spec = _spec(tmp_path, f'[survey]\nindex-url = "{tiny_index.url}"\n[packages]\ntinyprov = {{ last = 2 }}\n')
    db = tmp_path / "s.sqlite3"
    rc, out, _ = cli("survey", spec, "--db", db, "--workers", "1", "-q")
    assert "tinyprov 2.0 (after 1.1)" not in out and "Regressions (0)" in out  # 1.1 -> 2.0 fixes, breaks nothing
    assert rc == 0
    rc, html, _ = cli("survey", spec, "--db", db, "--report-only", "--format", "html")
    assert html.startswith("<!doctype html>") and "Regressions (0)" in html


# -- corpus: the cuda-python 12.6.1 break found by itself, and a worker killed mid-run ---------


@pytest.mark.corpus
def test_corpus_survey_finds_the_ccudart_break_and_its_victim(corpus: Path, tmp_path: Path, cli):
    house = tmp_path / "wheels"
    house.mkdir()
    for pattern in ("cuda_python-12.6.0-*", "cuda_python-12.6.1-*", "rmm_cu12-24.12.0-*"):
        os.symlink(corpus_file(corpus, pattern), house / corpus_file(corpus, pattern).name)
    spec = _spec(tmp_path, '[packages]\n"cuda-python" = ">=12.6"\n"rmm-cu12" = ["24.12.0"]\n')
    constraints = tmp_path / "constraints.txt"
    rc, out, _ = cli("survey", spec, "--db", tmp_path / "s.sqlite3", "--wheelhouse", house, "--workers", "2",
                     "--format", "json", "--constraints", constraints)
    doc = json.loads(out)
    (lost,) = [g for g in doc["regressions"] if g["kind"] == "capi-lost"]
    assert (lost["package"], lost["version"], lost["previous"]) == ("cuda-python", "12.6.1", "12.6.0")
    assert all(m in lost["summary"] for m in ("cuda.ccudart", "cuda.ccuda", "cuda.cnvrtc"))
    assert any(d.startswith("cuda.ccudart loses its __pyx_capi__") for d in lost["details"])
    (victim,) = lost["breaks"]
    assert victim.startswith("rmm-cu12 24.12.0: rmm.pylibrmm.device_buffer cimports") and "__pyx_capi__" in victim
    cells = {(c["provider_version"]): c for c in doc["matrix"] if c["consumer"] == "rmm-cu12"}
    assert cells["12.6.0"]["verdict"] == "ok" and cells["12.6.1"]["verdict"] == "breaks"
    assert "cuda-python!=12.6.1" in constraints.read_text().splitlines()
    # the matrix's C-API verdict agrees with `cuaudit check` on the same pair
    rc_check, check_out, _ = cli("check", corpus_file(corpus, "rmm_cu12-24.12.0-*"),
                                 corpus_file(corpus, "cuda_python-12.6.1-*"), "--select", "CU301", "-f", "json")
    assert "cuda.ccudart" in check_out and rc_check == 1


@pytest.mark.corpus
@pytest.mark.slow
def test_a_worker_killed_mid_task_only_reruns_its_task(corpus: Path, tmp_path: Path):
    from distributed import Client, LocalCluster

    from cuaudit.survey.run import execute, plan
    from cuaudit.survey.spec import load_spec
    from cuaudit.survey.store import open_store
    from cuaudit.survey.work import TaskOptions

    house = tmp_path / "wheels"
    house.mkdir()
    for pattern in ("cuda_python-12.6.*", "rmm_cu12-24.12.0-*", "fastrlock-*"):
        for f in sorted(corpus.glob(pattern)):
            os.symlink(f, house / f.name)
    spec = load_spec(str(_spec(tmp_path, '[packages]\n"cuda-python" = ">=12.6"\n"rmm-cu12" = ">=24"\n'
                                         'fastrlock = ">=0.8"\n')))
    store = open_store(str(tmp_path / "s.sqlite3"))
    todo = plan(spec, store, wheelhouse=str(house)).todo
    assert len(todo) == 5
    killed: dict = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        pids = client.run(os.getpid)

        def killer():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                for addr, keys in client.processing().items():
                    if keys and addr in pids:
                        time.sleep(0.5)  # let the audit get under way
                        if client.processing().get(addr) == keys:
                            killed.update(pid=pids[addr], keys=list(keys))
                            os.kill(pids[addr], signal.SIGKILL)
                            return
                time.sleep(0.05)

        thread = threading.Thread(target=killer)
        thread.start()
        # no fact cache: every audit reads its wheel, so the kill lands mid-task
        stats = execute(todo, store, scheduler=cluster.scheduler_address, options=TaskOptions(fact_cache=False))
        thread.join()
    assert killed, "no task was seen running"
    wheels = store.wheels(status=None)
    assert stats.releases == 5 and stats.failed == 0
    assert sorted(w.filename for w in wheels) == sorted(f.filename for f in todo)  # each release once
    rerun = [w for w in wheels if f"survey-{w.filename}" in killed["keys"]]
    assert rerun and all(not w.worker.endswith(f":{killed['pid']}") for w in rerun)
    store.close()

"""One survey task: fetch one release's wheel and audit it, on whichever worker runs it.

A task's result is plain data (tuples of strings and numbers), so it crosses
the Dask wire cheaply and the database can store it without cuaudit's
classes.  The audit is the one ``check`` runs (:func:`cuaudit.engine.audit`);
the facts the reports compare (C-API tables, needed libraries, device code,
metadata) come from :func:`cuaudit.engine.gather` over the same wheel, which
reads them back from the worker's fact cache.  Any failure becomes the
result's ``error``: one bad release never stops a survey.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any

from cuaudit.survey.index import ReleaseFile, download

#: Bump when what a task records changes: releases recorded by an older format are surveyed again.
RESULT_FORMAT = 1

#: The extractors whose facts a survey keeps (their names are the engine's stable ones).
KEPT_FACTS = ("elf", "cython-capi", "fatbin", "metadata")


@dataclass(frozen=True)
class TaskOptions:
    """What every task shares: where the worker keeps downloads and facts."""

    cache_dir: str | None = None  # None: the worker's default cache directory
    fact_cache: bool = True


@dataclass(frozen=True)
class FindingRow:
    code: str
    severity: str
    member: str
    symbol: str
    line: int | None
    key: str
    fingerprint: str
    message: str


@dataclass(frozen=True)
class ReleaseResult:
    """Everything a survey records about one release's wheel."""

    file: ReleaseFile
    error: str = ""
    download_seconds: float = 0.0
    bytes_fetched: int = 0
    audit_seconds: float = 0.0
    worker: str = ""
    findings: tuple[FindingRow, ...] = ()
    #: (member path, kind) of every member that provides a Python module (the C-API index needs them)
    modules: tuple[tuple[str, str], ...] = ()
    #: member -> the Cython module facts as JSON-able dicts
    cython: tuple[tuple[str, dict], ...] = ()
    #: (member, soname, needed library)
    needed: tuple[tuple[str, str, str], ...] = ()
    #: (member, kind, arch): sass/ptx/lto entries of the member's device code, distinct
    device_code: tuple[tuple[str, str, str], ...] = ()
    requires_dist: tuple[str, ...] = ()
    requires_python: str = ""


def audit_release(f: ReleaseFile, options: TaskOptions) -> ReleaseResult:
    """Fetch and audit one release (runs on a worker; never raises)."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    try:
        from cuaudit.store import default_cache_dir

        cache = options.cache_dir or default_cache_dir()
        got = download(f, os.path.join(cache, "survey", "wheels"))
        if f.size is None:  # an HTML index gives no sizes: the throughput figures need them
            f = dataclasses.replace(f, size=os.path.getsize(got.path))
    except Exception as exc:  # noqa: BLE001 - a release that cannot be fetched is recorded as such
        return ReleaseResult(f, error=f"download failed: {exc}", worker=worker)
    try:
        started = time.perf_counter()
        result = _audit(f, got.path, options, cache)
        return dataclasses.replace(result, download_seconds=round(got.seconds, 3), bytes_fetched=got.bytes_fetched,
                                   audit_seconds=round(time.perf_counter() - started, 3), worker=worker)
    except Exception as exc:  # noqa: BLE001 - cuaudit's own bug on one wheel: recorded, the survey goes on
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return ReleaseResult(f, error=f"audit failed: {type(exc).__name__}: {exc} "
                                      f"(at {os.path.basename(where.filename)}:{where.lineno})",
                             download_seconds=round(got.seconds, 3), bytes_fetched=got.bytes_fetched, worker=worker)


def _audit(f: ReleaseFile, path: str, options: TaskOptions, cache: str) -> ReleaseResult:
    from cuaudit import config as config_mod
    from cuaudit.analysis.capi_index import module_of
    from cuaudit.engine import audit, gather
    from cuaudit.model import MemberKind

    # One process per task: parallelism is the cluster's (a worker's child processes
    # would compete with the other workers for the same cores).
    config = config_mod.load(isolated=True, overrides={"jobs": 1, "cache-dir": cache})
    if not options.fact_cache:
        config = dataclasses.replace(config, cache=False)
    report = audit([path], config=config, command="survey")
    findings = tuple(
        FindingRow(x.code, str(x.severity), x.location.member or "", x.location.symbol or "", x.location.line,
                   x.key, x.fingerprint(), x.message)
        for x in report.findings
    )
    gathered = gather([path], config=config, extractors=KEPT_FACTS)
    gathered.extraction.store.close()
    facts = gathered.extraction.facts
    art = gathered.artifacts[0] if gathered.artifacts else None
    modules, cython, needed, device, requires, requires_python = [], [], [], set(), (), ""
    for m in art.members if art is not None else ():
        if module_of(m.path):
            modules.append((m.path, str(m.kind)))
        cy = facts.get((0, m.path, "cython-capi"))
        if cy is not None and m.kind is MemberKind.ELF:
            cython.append((m.path, dataclasses.asdict(cy)))
        elf = facts.get((0, m.path, "elf"))
        if elf is not None:
            needed += [(m.path, elf.soname, lib) for lib in elf.needed]
        dc = facts.get((0, m.path, "fatbin"))
        if dc is not None:
            device |= {(m.path, e.kind, e.arch) for e in dc.entries}
        md = facts.get((0, m.path, "metadata"))
        if md is not None and m.path.endswith(".dist-info/METADATA"):
            requires, requires_python = tuple(md.requires_dist), md.requires_python or ""
    return ReleaseResult(f, findings=findings, modules=tuple(modules), cython=tuple(cython), needed=tuple(needed),
                         device_code=tuple(sorted(device)), requires_dist=requires, requires_python=requires_python)


def cython_module_from(data: dict[str, Any]):
    """A stored Cython module fact back as the extractor's dataclass (what the C-API index reads)."""
    from cuaudit.facts.cython import CExport, CImport, CythonModule, TypeDef, TypeImport

    nested = {"exports": CExport, "imports": CImport, "type_imports": TypeImport, "types": TypeDef}
    fields = {f.name for f in dataclasses.fields(CythonModule)}
    kw = {}
    for k, v in data.items():
        if k not in fields:
            continue
        if k in nested:
            v = tuple(nested[k](**item) for item in v)
        elif isinstance(v, list):
            v = tuple(v)
        kw[k] = v
    return CythonModule(**kw)

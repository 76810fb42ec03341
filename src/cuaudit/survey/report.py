"""Survey reports from the database: regressions release to release, and the compatibility matrix.

Nothing here reads a wheel: the C-API comparison rebuilds each recorded
release as a :class:`StoredArtifact` (its module members and their Cython
facts from the store) and runs the same index and diff as ``cuaudit diff``
(:mod:`cuaudit.analysis.capi_index`, :mod:`cuaudit.analysis.capi_diff`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from cuaudit.requirement import Requirement, parse_requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cuaudit.inputs import Artifact
from cuaudit.model import ArtifactKind, ArtifactRef, Member, MemberKind
from cuaudit.survey.store import SurveyStore, WheelRow
from cuaudit.survey.work import cython_module_from

#: Regression kinds, in the order reports list them.
KINDS = ("capi-lost", "capi-changed", "new-error", "unused-library", "missing-library", "dropped-arch")
_CAPI_KIND = {"CU310": "capi-lost", "CU313": "capi-lost", "CU311": "capi-changed", "CU314": "capi-changed"}
#: Finding codes that have a regression kind of their own (not counted again as "new-error").
_FINDING_KIND = {"CU201": "unused-library", "CU203": "missing-library"}


class StoredArtifact(Artifact):
    """A recorded release as the C-API index sees it: module members and their Cython facts, no bytes."""

    def __init__(self, row: WheelRow, store: SurveyStore) -> None:
        super().__init__(ArtifactRef(ArtifactKind.WHEEL, row.filename, row.package, row.version))
        self.row = row
        self._modules = store.modules(row.id)
        self.cython = {m: cython_module_from(d) for m, d in store.cython_facts(row.id)}

    def list_members(self) -> list[Member]:
        return [Member(path, MemberKind(kind), 0, f"survey:{self.row.id}:{path}") for path, kind in self._modules]

    def open_member(self, path: str):  # pragma: no cover - reports never read bytes
        raise OSError(f"{path}: a survey record holds facts, not bytes")

    @property
    def label(self) -> str:
        return f"{self.row.package} {self.row.version}"


def _facts_of(art: Any, path: str):
    return art.cython.get(path) if isinstance(art, StoredArtifact) else None


@dataclass(frozen=True)
class Regression:
    """What one release broke relative to the previous surveyed release of the same package."""

    package: str
    version: str
    previous: str
    kind: str
    summary: str
    details: tuple[str, ...] = ()
    #: consumers in the survey whose compiled imports this breaks: "rmm-cu12 24.12.0: why"
    breaks: tuple[str, ...] = ()
    yanked: bool = False  # the index has since yanked this release

    def as_dict(self) -> dict:
        return {"package": self.package, "version": self.version, "previous": self.previous, "kind": self.kind,
                "summary": self.summary, "details": list(self.details), "breaks": list(self.breaks),
                "yanked": self.yanked}


@dataclass(frozen=True)
class Cell:
    """One consumer release x provider release verdict."""

    consumer: str
    consumer_version: str
    provider: str
    provider_version: str
    problems: tuple[str, ...]  # empty: compatible
    pinned_out: bool  # the consumer's Requires-Dist excludes this provider version

    @property
    def verdict(self) -> str:
        if self.problems:
            return "breaks"
        return "pinned-out" if self.pinned_out else "ok"

    def as_dict(self) -> dict:
        return {**vars(self), "problems": list(self.problems), "verdict": self.verdict}


@dataclass
class SurveyReport:
    releases: list[WheelRow] = field(default_factory=list)
    failed: list[WheelRow] = field(default_factory=list)
    regressions: list[Regression] = field(default_factory=list)
    matrix: list[Cell] = field(default_factory=list)
    run: dict | None = None
    unavailable: list[tuple[str, str, str]] = field(default_factory=list)
    #: what could not be compared, and why
    notes: list[str] = field(default_factory=list)

    def constraints(self, consumers: Iterable[str] = ()) -> str:
        """A pip constraints file: provider versions that break the chosen consumer releases.

        ``consumers``: ``NAME==VERSION`` of the consumer releases to protect; default,
        the newest surveyed release of every consumer in the matrix.
        """
        targets: set[tuple[str, str]] = set()
        for c in consumers:
            name, _, version = c.partition("==")
            targets.add((canonicalize_name(name), version))
        if not targets:
            newest: dict[str, str] = {}
            for cell in self.matrix:
                if cell.consumer not in newest or _v(cell.consumer_version) > _v(newest[cell.consumer]):
                    newest[cell.consumer] = cell.consumer_version
            targets = set(newest.items())
        bad: dict[str, dict[str, list[str]]] = {}
        for cell in self.matrix:
            if (cell.consumer, cell.consumer_version) in targets and cell.problems:
                why = f"{cell.consumer} {cell.consumer_version}: {cell.problems[0]}"
                bad.setdefault(cell.provider, {}).setdefault(cell.provider_version, []).append(why)
        lines = [f"# cuaudit survey: provider releases that break {', '.join(f'{n}=={v}' for n, v in sorted(targets))}"]
        for provider in sorted(bad):
            versions = sorted(bad[provider], key=_v)
            lines.append(f"{provider}{','.join('!=' + v for v in versions)}")
            lines += [f"#   {v}: {'; '.join(bad[provider][v])}" for v in versions]
        return "\n".join(lines) + "\n"

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions or self.failed else 0


def _v(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def build_report(store: SurveyStore, *, packages: Iterable[str] | None = None) -> SurveyReport:
    """Regressions and the compatibility matrix of everything recorded (or of ``packages``)."""
    keep = {canonicalize_name(p) for p in packages} if packages is not None else None
    rows = [r for r in store.wheels(status=None) if keep is None or r.package in keep]
    ok = sorted((r for r in rows if r.status == "ok"), key=lambda r: (r.package, _v(r.version)))
    report = SurveyReport(releases=ok, failed=[r for r in rows if r.status != "ok"])
    arts = {r.id: StoredArtifact(r, store) for r in ok}
    requirements = {r.id: _requirements(store.requirements(r.id)) for r in ok}
    imported = {r.id: store.imported_modules(r.id) for r in ok}
    by_package: dict[str, list[WheelRow]] = {}
    for r in ok:
        by_package.setdefault(r.package, []).append(r)
    for package, series in by_package.items():
        for old, new in zip(series, series[1:]):
            report.regressions += _regressions(store, old, new, arts, imported, requirements, report.notes)
    report.matrix = _matrix(ok, arts, imported, requirements, store)
    return report


# -- regressions ----------------------------------------------------------------------


def _regressions(store, old: WheelRow, new: WheelRow, arts, imported, requirements,
                 report_notes: list[str]) -> list[Regression]:
    from cuaudit import rules as rules_registry
    from cuaudit.analysis.capi_diff import Side, diff_findings
    from cuaudit.analysis.capi_index import CapiIndex

    out: list[Regression] = []

    def provides(a: StoredArtifact) -> set[str]:
        return set(CapiIndex.build([a], _facts_of).modules)

    def reg(kind: str, summary: str, details=(), breaks=()) -> None:
        out.append(Regression(new.package, new.version, old.version, kind, summary, tuple(details), tuple(breaks),
                              new.yanked))

    # C-API: the diff `cuaudit diff` makes, with the survey's other packages as consumers
    oa, na = arts[old.id], arts[new.id]
    old_side = Side(oa.label, [oa], CapiIndex.build([oa], _facts_of))
    new_side = Side(na.label, [na], CapiIndex.build([na], _facts_of))
    provided = set(old_side.index.modules)
    consumers = [a for a in arts.values() if a.row.package != new.package and (imported[a.row.id] - provides(a)) & provided]
    diff = diff_findings(old_side, new_side, consumers, lambda side, art: _facts_of, rules_registry.get)
    # Modules whose table the reader does not recover (a __pyx_capi__, no entry read; Cython 3.2 blobs):
    # every function would look removed.  Not compared, and the report says so.
    unread = {p.module for provs in new_side.index.modules.values() for p in provs
              if p.facts is not None and p.facts.has_capi and not p.facts.exports and not p.facts.reexport_candidates}
    grouped: dict[str, dict[str, list[str]]] = {}
    for f in diff:
        kind = _CAPI_KIND.get(f.code)
        module = f.evidence.get("module") or f.evidence.get("type", "").rsplit(".", 1)[0]
        if kind and module not in unread:
            grouped.setdefault(kind, {}).setdefault(module, []).append(f.message)
    broken: list[str] = []
    for f in diff:
        if f.code == "CU316" and f.evidence.get("module") not in unread:
            consumer = f.location.artifact
            note = _declared(requirements.get(_row_id(arts, consumer)), new.package, new.version)
            broken.append(f"{consumer.name} {consumer.version}: {f.message.split(': ', 1)[-1]}{note}")
    broken = sorted(set(broken))
    for kind, modules in sorted(grouped.items(), key=lambda kv: KINDS.index(kv[0])):
        what = "lose C-API" if kind == "capi-lost" else "change C-API"
        if len(modules) == 1 and len(next(iter(modules.values()))) == 1:
            summary, details = next(iter(modules.values()))[0], ()
        else:
            names = sorted(modules)
            summary = (f"{len(names)} module{'s' * (len(names) != 1)} {what if len(names) != 1 else what.replace('lose', 'loses').replace('change ', 'changes ')}: "
                       f"{', '.join(names[:6])}{' ...' if len(names) > 6 else ''}")
            details = [m for name in names for m in modules[name][:3]]
        # consumers go with the first C-API regression of the release (they break once)
        reg(kind, summary, details[:30], broken)
        broken = []
    if broken:  # consumers broken through a change listed under no kind above
        reg("capi-lost", "compiled consumers break", (), broken)
    if unread:
        report_notes.append(f"{new.package} {new.version}: the C-API of {len(unread)} module(s) was not read "
                            f"(it has a __pyx_capi__ and the reader recovered no entry), not compared: {', '.join(sorted(unread)[:4])}"
                            f"{' ...' if len(unread) > 4 else ''}")

    # findings: new errors, new unused or missing libraries
    before = {x["fingerprint"] for x in store.findings(old.id)}
    fresh: dict[str, list[dict]] = {}
    for x in store.findings(new.id):
        if x["fingerprint"] in before:
            continue
        kind = _FINDING_KIND.get(x["code"])
        if kind and x["severity"] in ("error", "warning"):
            fresh.setdefault(kind, []).append(x)
        elif x["severity"] == "error" and x["code"] not in _CAPI_CODES:
            fresh.setdefault(f"new-error:{x['code']}", []).append(x)
    exposed = _exposed(arts, requirements, new)
    for key, items in sorted(fresh.items()):
        kind, _, code = key.partition(":")
        if kind == "new-error":
            reg(kind, f"{len(items)} new {code} error{'s' * (len(items) != 1)}",
                [f"{x['member']}: {x['message']}" for x in items[:10]], exposed)
        else:
            libs = sorted({x["symbol"] or x["key"] for x in items})
            members = len({x["member"] for x in items})
            what = "unused" if kind == "unused-library" else "missing"
            reg(kind, f"{len(libs)} {what} librar{'ies' if len(libs) != 1 else 'y'} newly needed by {members} "
                      f"file{'s' * (members != 1)}: {', '.join(libs[:8])}{' ...' if len(libs) > 8 else ''}",
                [f"{x['member']}: {x['symbol'] or x['key']}" for x in items[:10]], exposed)

    # device code: architectures the previous release had and this one has not
    archs = lambda rid: {arch for _m, kind, arch in store.device_code(rid) if kind in ("sass", "ptx")}  # noqa: E731
    dropped = sorted(archs(old.id) - archs(new.id))
    if dropped:
        reg("dropped-arch", f"drops device code for {', '.join(dropped)}", (), exposed)
    return out


_CAPI_CODES = {"CU301", "CU302", "CU303"}  # a consumer's own C-API verdicts: the matrix says these


def _row_id(arts: dict, ref: ArtifactRef) -> int | None:
    for rid, a in arts.items():
        if a.ref == ref:
            return rid
    return None


def _requirements(lines: list[str]) -> list[Requirement]:
    return [r for r in map(parse_requirement, lines) if r is not None and not r.optional]


def _declared(reqs: list[Requirement] | None, package: str, version: str) -> str:
    for req in reqs or ():
        if req.name == package and req.specifier and not req.admits(version):
            return f" (its Requires-Dist `{req}` keeps pip from installing them together)"
    return ""


def _exposed(arts: dict, requirements: dict, new: WheelRow) -> list[str]:
    """Releases in the survey that declare a requirement admitting ``new``: they get it on install."""
    out = []
    for rid, a in arts.items():
        if a.row.package == new.package:
            continue
        for req in requirements[rid]:
            if req.name == new.package and req.admits(new.version):
                out.append(f"{a.row.package} {a.row.version}: requires {req}, which admits {new.version}")
    return sorted(out)


# -- compatibility matrix -----------------------------------------------------------------

_CU_SUFFIX = re.compile(r"-(?:cu|cuda)(\d+)x?$")
#: Packages whose own major version is the CUDA major they are built for.
VERSION_IS_CUDA_MAJOR = frozenset({"cuda-python", "cuda-bindings"})
_CUDART = re.compile(r"^libcudart\.so\.(\d+)")


def cuda_major(row: WheelRow, store: SurveyStore, requirements: list[Requirement]) -> int | None:
    """The CUDA major a release is built for: its name, its version, the libcudart it needs, or its requirements."""
    if m := _CU_SUFFIX.search(row.package):
        return int(m[1])
    if row.package in VERSION_IS_CUDA_MAJOR:
        return _v(row.version).major or None
    majors = {int(m[1]) for _member, _so, lib in store.needed(row.id) if (m := _CUDART.match(lib))}
    if len(majors) == 1:
        return majors.pop()
    for req in requirements:
        if m := _CU_SUFFIX.search(req.name):
            return int(m[1])
    return None


def _numpy_majors(reqs: list[Requirement]) -> set[int] | None:
    for req in reqs:
        if req.name == "numpy":
            return {major for major in (1, 2) if any(req.admits(v) for v in _NUMPY_PROBES[major])}
    return None


_NUMPY_PROBES = {1: ("1.19.5", "1.23.5", "1.26.4"), 2: ("2.0.2", "2.2.6", "2.4.0")}


def _matrix(ok: list[WheelRow], arts, imported, requirements, store) -> list[Cell]:
    from cuaudit.analysis.capi_index import CapiIndex, import_problems

    provides: dict[int, set[str]] = {r.id: set(CapiIndex.build([arts[r.id]], _facts_of).modules) for r in ok}
    tops = {rid: {m.split(".")[0] for m in mods} for rid, mods in provides.items()}
    wants = {rid: {m.split(".")[0] for m in mods - provides[rid]} for rid, mods in imported.items() if rid in provides}
    by_package: dict[str, list[WheelRow]] = {}
    for r in ok:
        by_package.setdefault(r.package, []).append(r)
    majors = {r.id: cuda_major(r, store, requirements[r.id]) for r in ok}
    numpy = {r.id: _numpy_majors(requirements[r.id]) for r in ok}
    cells: list[Cell] = []
    for consumer, crows in sorted(by_package.items()):
        for provider, prows in sorted(by_package.items()):
            if provider == consumer:
                continue
            capi_link = any(wants[c.id] & tops[p.id] for c in crows for p in prows)
            declared = any(canonicalize_name(q.name) == provider for c in crows for q in requirements[c.id])
            if not (capi_link or declared):
                continue
            for c in crows:
                for p in prows:
                    problems: list[str] = []
                    if wants[c.id] & tops[p.id]:
                        index = CapiIndex.build([arts[p.id], arts[c.id]], _facts_of)
                        for cons in index.consumers():
                            if cons.artifact is not arts[c.id]:
                                continue
                            for prob in import_problems(cons, index):
                                if prob.module.split(".")[0] in tops[p.id] and (prob.provider is None or prob.provider.artifact is arts[p.id]):
                                    problems.append(f"C-API: {cons.module} cimports from {prob.module}: {prob.kind}")
                    cm, pm = majors[c.id], majors[p.id]
                    if cm and pm and cm != pm:
                        problems.append(f"CUDA major: {consumer} {c.version} is built for CUDA {cm}, "
                                        f"{provider} {p.version} for CUDA {pm}")
                    cn, pn = numpy[c.id], numpy[p.id]
                    if cn is not None and pn is not None and not (cn & pn):
                        problems.append(f"NumPy ABI: {consumer} {c.version} declares NumPy {sorted(cn)}, "
                                        f"{provider} {p.version} NumPy {sorted(pn)}")
                    pinned = bool(_declared(requirements[c.id], provider, p.version))
                    cells.append(Cell(consumer, c.version, provider, p.version, tuple(sorted(set(problems))), pinned))
    return cells

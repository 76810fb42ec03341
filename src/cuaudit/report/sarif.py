"""SARIF 2.1.0 (OASIS), for GitHub code scanning and other SARIF viewers.

One run per report.  The location scheme (``docs/sarif.md``) in short:

* a file of a source tree, or a single file named on the command line:
  ``uri`` relative to ``%SRCROOT%`` (the working directory) when the file is
  under it, an absolute ``file://`` URI otherwise;
* a member of a wheel or sdist: a *nested artifact* (SARIF §3.24.3): the
  archive is in ``run.artifacts`` with its own location, the member is an
  artifact with ``parentIndex`` pointing at it and ``uri`` = the member's
  path inside the archive; result locations name the member's ``index``;
* a file of an installed distribution: ``uri`` relative to a
  ``SITE_PACKAGES`` base (``SITE_PACKAGES_2``, ... for further site
  directories) declared in ``run.originalUriBaseIds``;
* a symbol inside a binary (a needed library, a dynamic symbol, a C-API
  function): a ``logicalLocation`` beside the member's physical location;
* lines and columns: a ``region`` (1-based; ``endColumn`` is the column
  after the last character, as in cuaudit's own locations and edits).

The log is deterministic for the same inputs and working directory, except
under ``run.properties.stats`` (timings, cache hits).
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from cuaudit.model import ArtifactKind, ArtifactRef, Finding, Location, Severity
from cuaudit.report import fix_text
from cuaudit.escape import printable, valid_unicode_deep

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.engine import Report

SARIF_VERSION = "2.1.0"
#: The official schema (OASIS SARIF 2.1.0 Errata 01); a copy is in tests/data/.
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
#: Key of ``partialFingerprints``: Finding.fingerprint() (code, distribution, member, symbol, key).
FINGERPRINT_KEY = "cuauditFingerprint/v1"
SRCROOT = "%SRCROOT%"
SITE_PACKAGES = "SITE_PACKAGES"
INFORMATION_URI = "https://pypi.org/project/cuaudit/"

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_LIBRARY = re.compile(r"(^|/)lib[^/]*\.so(\.[0-9]+)*$|\.so(\.[0-9]+)*$|\.dll$|\.dylib$")
_PY_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")

#: Notification descriptors (tool.driver.notifications), referenced by index.
_NOTIFICATIONS = [
    {
        "id": "skipped",
        "name": "skipped",
        "shortDescription": {"text": "An input or member was not analysed."},
        "fullDescription": {
            "text": "cuaudit could not or would not analyse this item (unreadable, unsupported, "
            "listed but missing); its checks did not run on it."
        },
        "defaultConfiguration": {"level": "note"},
    },
    {
        "id": "probe",
        "name": "probe",
        "shortDescription": {"text": "Audited code was imported or run in a subprocess (--probe)."},
        "fullDescription": {
            "text": "An opt-in probe ran audited code in a separate process with a timeout; "
            "findings confirmed by it have origin 'probe'."
        },
        "defaultConfiguration": {"level": "note"},
    },
]


def _mime_type(ref: ArtifactRef) -> str | None:
    name = ref.path.lower()
    if ref.kind is ArtifactKind.WHEEL or name.endswith(".zip"):
        return "application/zip"
    if name.endswith((".tar.gz", ".tgz")):
        return "application/gzip"
    return None


def _uri_path(path: str) -> str:
    """A relative reference for a POSIX path (percent-encoded; '/' kept).

    The path's own bytes are encoded: a name that is not UTF-8 (surrogate
    escapes from ``os.fsdecode``) gives ``%FF``, not a crash."""
    return quote(os.fsencode(path), safe="/-._~!$&'()*+,;=:@")


def _file_uri(path: str) -> str:
    """An absolute ``file://`` URI, with a trailing slash for directories when asked."""
    posix = os.path.abspath(path).replace(os.sep, "/")
    if not posix.startswith("/"):  # a Windows drive: file:///C:/...
        posix = "/" + posix
    return "file://" + _uri_path(posix)


def symbol_kind(finding: Finding) -> str:
    """The SARIF logical-location kind of the finding's symbol.

    A rule may state it as ``evidence["symbol_kind"]`` (any SARIF kind:
    ``function``, ``member``, ``module``, ``variable``, ``type``, ...).
    Otherwise: a shared-library name (a DT_NEEDED entry) is a ``module``, a
    dotted Python name (``cupy.cuda.nccl``) a ``module``, anything else a
    dynamic symbol or C-API entry, i.e. a ``function``.
    """
    stated = finding.evidence.get("symbol_kind") if isinstance(finding.evidence, dict) else None
    if isinstance(stated, str) and stated:
        return stated
    symbol = finding.location.symbol or ""
    if _LIBRARY.search(symbol) or _PY_DOTTED.match(symbol):
        return "module"
    return "function"


class _Locator:
    """Maps cuaudit locations to SARIF artifactLocations; collects run.artifacts and base ids."""

    def __init__(self, cwd: str) -> None:
        self.cwd = os.path.abspath(cwd)
        self.artifacts: list[dict[str, Any]] = []
        self._index: dict[tuple, int] = {}
        self.base_ids: dict[str, dict[str, Any]] = {}
        self._site_ids: dict[str, str] = {}

    # -- bases ----------------------------------------------------------------
    def _under_cwd(self, path: str) -> str | None:
        """``path`` relative to the working directory (POSIX), or None when outside it."""
        path = os.path.abspath(path)
        try:
            if os.path.commonpath([self.cwd, path]) != self.cwd:
                return None
        except ValueError:  # different drives
            return None
        rel = os.path.relpath(path, self.cwd)
        return "" if rel == "." else rel.replace(os.sep, "/")

    def file_location(self, path: str, *, directory: bool = False) -> dict[str, Any]:
        rel = self._under_cwd(path)
        if rel is None:
            uri = _file_uri(path)
            return {"uri": uri + "/" if directory and not uri.endswith("/") else uri}
        self.base_ids.setdefault(
            SRCROOT,
            {
                "uri": _file_uri(self.cwd).rstrip("/") + "/",
                "description": {"text": "The working directory cuaudit ran in."},
            },
        )
        uri = _uri_path(rel)
        if directory:
            uri = uri + "/" if uri else "./"
        return {"uri": uri, "uriBaseId": SRCROOT}

    def site_base(self, site: str) -> str:
        if site not in self._site_ids:
            n = len(self._site_ids) + 1
            base = SITE_PACKAGES if n == 1 else f"{SITE_PACKAGES}_{n}"
            self._site_ids[site] = base
            self.base_ids[base] = {
                "uri": _file_uri(site).rstrip("/") + "/",
                "description": {"text": "A site directory of the audited environment (installed distributions)."},
            }
        return self._site_ids[site]

    # -- artifacts ------------------------------------------------------------
    def archive(self, ref: ArtifactRef) -> int:
        key = ("archive", ref.path)
        if key not in self._index:
            entry: dict[str, Any] = {
                "location": self.file_location(ref.path),
                "roles": ["analysisTarget"],
                "properties": {"kind": str(ref.kind), "name": ref.name or None, "version": ref.version or None},
            }
            mime = _mime_type(ref)
            if mime:
                entry["mimeType"] = mime
            self._index[key] = len(self.artifacts)
            self.artifacts.append(entry)
        index = self._index[key]
        return index

    def member(self, ref: ArtifactRef, member: str) -> int:
        parent = self.archive(ref)
        key = ("member", ref.path, member)
        if key not in self._index:
            self._index[key] = len(self.artifacts)
            self.artifacts.append({"location": {"uri": _uri_path(member)}, "parentIndex": parent})
        return self._index[key]

    def artifact_location(self, ref: ArtifactRef, member: str | None) -> dict[str, Any]:
        kind = ref.kind
        if kind in (ArtifactKind.WHEEL, ArtifactKind.SDIST):
            if member:
                i = self.member(ref, member)
                return {"uri": self.artifacts[i]["location"]["uri"], "index": i}
            i = self.archive(ref)
            return {**self.artifacts[i]["location"], "index": i}
        if kind is ArtifactKind.INSTALLED:
            base = self.site_base(ref.path)
            # The distribution as a whole: its site directory (the logical location names it).
            return {"uri": _uri_path(member) if member else "./", "uriBaseId": base}
        if kind is ArtifactKind.TREE:
            if member:
                return self.file_location(os.path.join(ref.path, *member.split("/")))
            return self.file_location(ref.path, directory=True)
        return self.file_location(ref.path)  # FILE: the file itself (its one member is its name)

    def location(self, loc: Location, *, symbol_kind: str = "function") -> dict[str, Any]:
        physical: dict[str, Any] = {"artifactLocation": self.artifact_location(loc.artifact, loc.member)}
        region = _region(loc)
        if region:
            physical["region"] = region
        out: dict[str, Any] = {"physicalLocation": physical}
        logical = []
        if loc.symbol:
            within = loc.member or loc.artifact.name or PurePosixPath(loc.artifact.path).name
            logical.append({"name": loc.symbol, "fullyQualifiedName": f"{within}!{loc.symbol}", "kind": symbol_kind})
        elif loc.artifact.kind is ArtifactKind.INSTALLED and not loc.member:
            logical.append(
                {
                    "name": loc.artifact.name,
                    "fullyQualifiedName": f"{loc.artifact.name}=={loc.artifact.version}"
                    if loc.artifact.version
                    else loc.artifact.name,
                    "kind": "package",
                }
            )
        if logical:
            out["logicalLocations"] = logical
        return out


def _region(loc: Location) -> dict[str, int]:
    if loc.line is None:
        return {}
    region = {"startLine": loc.line}
    if loc.column is not None:
        region["startColumn"] = loc.column
    if loc.end_line is not None:
        region["endLine"] = loc.end_line
    if loc.end_column is not None:
        region["endColumn"] = loc.end_column
    return region


def _rule_descriptor(code: str) -> dict[str, Any]:
    from cuaudit.rules import get

    try:
        cls = get(code)
    except KeyError:
        return {"id": code, "shortDescription": {"text": code}}
    doc = cls.doc()
    what = doc.sections.get("What it does", doc.summary)
    why = doc.sections.get("Why is this bad?", "")
    markdown = doc.markdown()
    return {
        "id": code,
        "name": doc.name,
        "shortDescription": {"text": doc.summary},
        "fullDescription": {"text": _plain(what)},
        "help": {"text": _plain(markdown), "markdown": markdown},
        "defaultConfiguration": {"level": _LEVEL[doc.severity]},
        "properties": {
            "tags": [t for t in ("cuaudit", doc.family) if t],
            "family": code[:3] + "xx",
            **({"why": _plain(why)} if why else {}),
        },
    }


def _plain(markdown: str) -> str:
    """Markdown without code-fence lines and heading marks (for SARIF ``text`` fields)."""
    lines = [ln for ln in markdown.splitlines() if not ln.startswith("```")]
    return "\n".join(ln.lstrip("#").lstrip() if ln.startswith("#") else ln for ln in lines).strip()


def _fix(finding: Finding, locator: _Locator) -> dict[str, Any] | None:
    fix = finding.fix
    if fix is None or not fix.edits:
        return None  # SARIF fixes need artifactChanges; text-only fixes go in the message and properties
    changes: dict[str, dict[str, Any]] = {}
    for e in fix.edits:
        member = e.member
        entry = changes.setdefault(
            member,
            {"artifactLocation": locator.artifact_location(finding.location.artifact, member), "replacements": []},
        )
        entry["replacements"].append(
            {
                "deletedRegion": {
                    "startLine": e.start_line,
                    "startColumn": e.start_column,
                    "endLine": e.end_line,
                    "endColumn": e.end_column,
                },
                "insertedContent": {"text": e.content},
            }
        )
    return {
        "description": {"text": printable(fix.description)},
        "artifactChanges": list(changes.values()),
        "properties": {"applicability": str(fix.applicability)},
    }


def log(report: "Report", *, cwd: str | None = None) -> dict[str, Any]:
    """The SARIF log as a JSON-able dict."""
    from cuaudit.report.json_report import _jsonable, artifact_dict

    locator = _Locator(cwd or os.getcwd())
    # Every archive input is listed (analysisTarget), in input order, before the members.
    for ref in report.artifacts:
        if ref.kind in (ArtifactKind.WHEEL, ArtifactKind.SDIST):
            locator.archive(ref)

    rule_index: dict[str, int] = {}
    rules: list[dict[str, Any]] = []
    for f in report.findings:
        if f.code not in rule_index:
            rule_index[f.code] = -1
    for code in sorted(rule_index):
        rule_index[code] = len(rules)
        rules.append(_rule_descriptor(code))

    results = []
    for f in report.findings:
        text = printable(f.message)
        if f.fix is not None:
            text += fix_text(f.fix)
        result: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": rule_index[f.code],
            "level": _LEVEL[f.severity],
            "message": {"text": text},
            "locations": [locator.location(f.location, symbol_kind=symbol_kind(f))],
            "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint()},
        }
        sarif_fix = _fix(f, locator)
        if sarif_fix is not None:
            result["fixes"] = [sarif_fix]
        props: dict[str, Any] = {"origin": f.origin, "evidence": _jsonable(f.evidence)}
        if f.key:
            props["key"] = f.key
        if f.fix is not None:
            props["fix"] = {"description": printable(f.fix.description), "applicability": str(f.fix.applicability)}
            if f.fix.user:
                props["fix"]["user"] = printable(f.fix.user)
            if f.fix.maintainer:
                props["fix"]["maintainer"] = printable(f.fix.maintainer)
        result["properties"] = props
        results.append(result)

    notifications = []
    for s in report.skipped:
        note: dict[str, Any] = {
            "level": "note",
            "message": {"text": printable(s.reason)},
            "locations": [locator.location(s.location)],
            "descriptor": {"id": "skipped", "index": 0},
        }
        if s.code:
            ref: dict[str, Any] = {"id": s.code}
            if s.code in rule_index:
                ref["index"] = rule_index[s.code]
            note["associatedRule"] = ref
        notifications.append(note)
    for p in report.probes:
        notifications.append(
            {
                "level": "note",
                "message": {"text": f"{p.what}: {p.outcome} ({p.seconds:.2f}s)"},
                "descriptor": {"id": "probe", "index": 1},
                "properties": {"command": p.command, "seconds": p.seconds, "outcome": p.outcome},
            }
        )

    exit_code = report.exit_code()
    internal_errors = sum(1 for f in report.findings if f.code == "CU011")
    invocation: dict[str, Any] = {
        "executionSuccessful": internal_errors == 0,
        "exitCode": exit_code,
        "exitCodeDescription": "findings at or above the fail-on severity" if exit_code else "success",
        "workingDirectory": {"uri": _file_uri(locator.cwd).rstrip("/") + "/"},
        "toolExecutionNotifications": notifications,
        "properties": {"command": report.command, "failOn": str(report.config.fail_on)},
    }

    driver: dict[str, Any] = {
        "name": "cuaudit",
        "version": report.tool_version,
        "semanticVersion": report.tool_version,
        "informationUri": INFORMATION_URI,
        "rules": rules,
        "notifications": _NOTIFICATIONS,
    }
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "invocations": [invocation],
        "columnKind": "unicodeCodePoints",
    }
    if locator.base_ids:
        run["originalUriBaseIds"] = {k: locator.base_ids[k] for k in sorted(locator.base_ids)}
    if locator.artifacts:
        run["artifacts"] = locator.artifacts
    run["results"] = results
    counts = report.counts()
    run["properties"] = {
        "inputs": [artifact_dict(a) for a in report.artifacts],
        "rulesRun": list(report.rules),
        "summary": {
            **counts,
            "total": len(report.findings),
            "suppressed": report.suppressed,
            "baselined": report.baselined,
            "skipped": len(report.skipped),
        },
        "stats": dict(report.stats),
    }
    return valid_unicode_deep({"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]})



def render(report: "Report", *, color: bool = False) -> str:
    # ASCII: the data keeps what the input held (a bidi override in a name), the bytes written do not carry it
    from cuaudit.report.json_text import dumps

    return dumps(log(report)) + "\n"

"""The data every stage of the pipeline shares: artifacts, members, findings.

inputs -> formats -> facts -> analysis -> rules -> finish -> reports.
Everything here is a frozen dataclass (or an enum) so that facts and findings
can be cached, compared, sorted and serialised without surprises.  The two
exceptions of the pipeline live here too, at the bottom of the layering:
:class:`InputError` (the one problem type that inputs, formats and extractors
raise; the engine alone turns it into a CU0xx finding) and
:class:`ConfigError` (a usage error, exit 2).
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from cuaudit.names import canonical_name


class Severity(enum.IntEnum):
    """How bad a finding is. Ordered: ``INFO < WARNING < ERROR``."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (expected error, warning or info)") from None


class Applicability(str, enum.Enum):
    """How safe an automatic fix is (ruff's grading)."""

    SAFE = "safe"  # keeps the program's meaning; applied by --fix
    UNSAFE = "unsafe"  # may change meaning; applied by --fix --unsafe-fixes
    DISPLAY = "display"  # shown as a suggestion only

    def __str__(self) -> str:
        return self.value


class ArtifactKind(str, enum.Enum):
    WHEEL = "wheel"
    SDIST = "sdist"
    TREE = "tree"
    FILE = "file"  # a single file named on the command line (an ELF, a .py)
    INSTALLED = "installed"  # an installed distribution; members relative to its site dir

    def __str__(self) -> str:
        return self.value


class MemberKind(str, enum.Enum):
    """A coarse classification by name; extractors refine it by content."""

    PYTHON = "python"
    STUB = "stub"
    ELF = "elf"
    CYTHON = "cython"  # .pyx / .pxd sources
    CUDA = "cuda"  # .cu / .cuh sources
    BUILD = "build"  # setup.py, pyproject.toml, CMakeLists.txt, meson.build, ...
    METADATA = "metadata"  # METADATA / PKG-INFO / RECORD / WHEEL / entry_points.txt
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, order=True)
class ArtifactRef:
    """Identifies an artifact in findings and reports.

    ``path`` is the filesystem path of the wheel, sdist, tree or file; for an
    installed distribution it is the site directory its RECORD paths are
    relative to.  ``name``/``version`` are the distribution's when known.
    """

    kind: ArtifactKind
    path: str
    name: str = ""
    version: str = ""

    @property
    def display(self) -> str:
        if self.kind is ArtifactKind.INSTALLED:
            return f"{self.name} {self.version} (installed)"
        return self.path


@dataclass(frozen=True)
class Member:
    """One file inside an artifact (a wheel member, a file of a tree, ...).

    ``path`` is POSIX, relative to the artifact.  ``content_key`` identifies
    the content for the fact cache without reading it (zip CRC + size, or the
    file's stat), see ``cuaudit.inputs``.
    """

    path: str
    kind: MemberKind
    size: int
    content_key: str

    @property
    def suffix(self) -> str:
        name = self.path.rsplit("/", 1)[-1]
        return name[name.rfind(".") :] if "." in name else ""


@dataclass(frozen=True, order=True)
class Location:
    """Where a finding is.

    ``member`` is the file inside the artifact (None: the artifact as a
    whole); ``line``/``column`` are 1-based; ``symbol`` names an object
    inside a binary (a library name, a dynamic symbol, a C-API function).
    """

    artifact: ArtifactRef
    member: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    symbol: str | None = None

    def __str__(self) -> str:
        text = self.artifact.display
        if self.member:
            text = f"{text}:{self.member}" if self.artifact.kind is not ArtifactKind.TREE else self.member
            if self.artifact.kind is ArtifactKind.FILE:
                text = self.artifact.path
        if self.line is not None:
            text += f":{self.line}"
            if self.column is not None:
                text += f":{self.column}"
        if self.symbol:
            text += f" [{self.symbol}]"
        return text


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions of a member."""

    member: str
    start_line: int
    start_column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    """What to do about a finding: always a text, sometimes an automatic edit.

    ``user`` is the workaround a user can apply now (the wheel to install,
    the import to write, the pin); ``maintainer`` the fix at the source (the
    linker flag, the re-export).  ``description`` is the one-line text every
    format has always shown: given alone it stays the whole fix; left empty
    it is made from the other two.
    """

    description: str = ""
    edits: tuple[Edit, ...] = ()
    applicability: Applicability = Applicability.DISPLAY
    user: str = ""
    maintainer: str = ""

    def __post_init__(self) -> None:
        if not self.description:
            parts = [f"now: {self.user}" if self.user else "", f"at the source: {self.maintainer}" if self.maintainer else ""]
            object.__setattr__(self, "description", "; ".join(p for p in parts if p))


@dataclass(frozen=True)
class Finding:
    """One problem found by one rule.

    ``evidence`` holds the structured facts behind the message (JSON-able),
    ``key`` distinguishes several findings of one rule at one location (the
    library name, the function name) and makes baselines stable across
    versions; ``origin`` is ``"static"`` or ``"probe"`` (confirmed by running
    the code in a subprocess).
    """

    code: str
    severity: Severity
    message: str
    location: Location
    fix: Fix | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""
    origin: str = "static"

    def sort_key(self) -> tuple:
        loc = self.location
        return (
            loc.artifact.path,
            loc.artifact.name,
            loc.member or "",
            loc.line or 0,
            loc.column or 0,
            self.code,
            loc.symbol or "",
            self.key,
            self.message,
        )

    def fingerprint(self) -> str:
        """A stable identity for baselines: no version numbers, no message text.

        The distribution name is normalised (PEP 503), and so are the parts of
        member paths that change with every release: the version in
        ``name-1.2.dist-info/`` and the content hash auditwheel puts in
        vendored library names (``libgomp-a34b3233.so.1``).
        """
        loc = self.location
        artifact = canonical_name(loc.artifact.name or loc.artifact.path.rsplit("/", 1)[-1])
        member = _stable_member(loc.member or "")
        key = _stable_member(self.key) if self.key else self.message
        parts = [self.code, artifact, member, loc.symbol or "", key]
        # surrogateescape: a name that is not UTF-8 hashes as its own bytes (valid text is unchanged)
        return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


_META_DIR = re.compile(r"(^|/)([^/]+?)-[^/-]+\.(dist-info|data|egg-info)(?=/|$)")
_VENDORED_HASH = re.compile(r"-[0-9a-f]{8}(?=\.so(\.|$|:)|\.dylib|\.dll)")


def _stable_member(path: str) -> str:
    if ".d" not in path and "info" not in path and ".so" not in path:
        return path  # neither pattern can match (most paths: a report fingerprints thousands)
    path = _META_DIR.sub(lambda m: f"{m.group(1)}{canonical_name(m.group(2))}.{m.group(3)}", path)
    return _VENDORED_HASH.sub("", path)


@dataclass(frozen=True)
class Skipped:
    """Something that was not analysed, and why (data, not an exception)."""

    location: Location
    reason: str
    code: str = ""


@dataclass(frozen=True)
class EnvironmentInfo:
    """What `cuaudit env` learnt about the interpreter, without importing packages."""

    python: str
    version: str
    implementation: str
    platform: str
    prefix: str
    site_dirs: tuple[str, ...]
    sys_path: tuple[str, ...]
    environ: Mapping[str, str] = field(default_factory=dict)  # LD_LIBRARY_PATH, CUDA_HOME, CONDA_PREFIX ...
    #: every installed distribution is among the audited artifacts; False where a command audits
    #: only some of them (explain): a module of another distribution is then unknown, not missing
    complete: bool = True


class InputError(Exception):
    """A member (or a whole input) is unreadable or malformed.

    Raised by inputs, formats and extractors; the engine turns it into a CU0xx
    finding for that member, whatever rules are selected.  ``code`` is the
    CU0xx rule code; ``detail`` the evidence (``line``/``column`` become the
    finding's position).
    """

    def __init__(self, code: str, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail


class ConfigError(Exception):
    """Invalid configuration or command line: a usage error (exit 2)."""


@dataclass(frozen=True)
class Problem:
    """A CU0xx problem met while listing or reading an input, as data.

    Inputs record these (``Artifact.problem``); the engine turns each into a
    finding of the CU0xx rule named by ``code``.
    """

    code: str
    message: str
    location: Location
    evidence: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""


@dataclass(frozen=True)
class ProbeRecord:
    """Something that imported or ran audited code (only with --probe)."""

    what: str
    command: str
    seconds: float
    outcome: str


def lasting_failure(code: str, evidence: dict) -> bool:
    """Whether a failure on a member says something lasting about its bytes, so that the fact cache
    may keep it: not CU001 (permissions and I/O errors change without the member's content key),
    CU011 (cuaudit's own bug) or a pass stopped by its CPU-time budget (a faster machine, or a larger
    budget, may finish it: :mod:`cuaudit.time_budget`)."""
    return code not in ("CU001", "CU011") and not out_of_time(evidence)


def out_of_time(evidence: dict) -> bool:
    """Whether a finding's evidence says a pass was stopped by its CPU-time budget (CU004)."""
    return evidence.get("budget") == "ANALYSIS_SECONDS"


def error_for(exc: BaseException) -> tuple[str, str, dict]:
    """(code, message, evidence) for a failure on one member (an extractor's) or one item of a rule:
    the input's own fault where the exception says so, else CU011 (cuaudit's) with where it was raised."""
    if isinstance(exc, InputError):
        return exc.code, exc.message, dict(exc.detail)
    if isinstance(exc, OSError):
        return "CU001", f"cannot read: {exc.strerror or exc}", {}
    import traceback  # here, with zipfile: an audit of installed files never needs them
    import zipfile
    import zlib

    if isinstance(exc, (zipfile.BadZipFile, zlib.error, EOFError)):
        return "CU002", f"corrupt archive data: {exc}", {}
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
    return "CU011", f"internal error while analysing this file: {type(exc).__name__}: {exc} (at {where})", {
        "exception": type(exc).__name__,
        "at": where,
    }

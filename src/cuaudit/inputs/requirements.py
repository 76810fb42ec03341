"""A pinned set before it is installed: ``requirements.txt`` or ``pylock.toml`` (PEP 751).

Each exact pin (``name==version``, or a lock file's package) becomes a
``NAME==VERSION`` input fetched through :mod:`cuaudit.inputs.index` (wheels
only, never built), and the whole set is audited together: C-API providers,
CUDA majors, libraries one wheel needs and another ships.  A line that pins
nothing exact (a range, a URL, an editable) is listed as skipped with the
reason: which wheel pip would pick for it cannot be known without resolving.
Environment markers are evaluated for this interpreter, as pip would.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from cuaudit.model import ArtifactKind, ArtifactRef, ConfigError, Location, Skipped


@dataclass
class PinnedSet:
    source: str
    pins: list[tuple[int, str]] = field(default_factory=list)  # (line, NAME==VERSION)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def ref(self) -> ArtifactRef:
        return ArtifactRef(ArtifactKind.FILE, os.path.abspath(self.source))

    def skip(self, line: int | None, reason: str) -> None:
        self.skipped.append(Skipped(Location(self.ref, os.path.basename(self.source), line=line), reason))


def read_pinned(path: str) -> PinnedSet:
    """The exact pins of a requirements file or a ``pylock.toml``; a file that cannot be read is a ConfigError."""
    name = os.path.basename(path)
    if name == "pylock.toml" or re.fullmatch(r"pylock\.[^.]+\.toml", name):
        return _read_pylock(path)
    return _read_requirements(path, set())


def _read_requirements(path: str, seen: set[str]) -> PinnedSet:
    from cuaudit.requirement import parse_requirement

    out = PinnedSet(path)
    real = os.path.realpath(path)
    if real in seen:
        return out
    seen.add(real)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(16 * 1024**2)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    # continuation lines join before anything else, as pip does
    lines = text.replace("\\\r\n", "").replace("\\\n", "").splitlines()
    for n, raw in enumerate(lines, 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ", "-r", "--requirement=")):
            target = re.sub(r"^(-r|--requirement)[= ]?\s*", "", line)
            nested = _read_requirements(os.path.join(os.path.dirname(path), target), seen)
            out.pins += nested.pins
            out.skipped += nested.skipped
            continue
        if line.startswith(("-e", "--editable")):
            out.skip(n, f"{line}: an editable install is built from source, not a pinned wheel")
            continue
        if line.startswith("-"):
            continue  # --index-url, --hash, -c ...: options for pip, not packages
        spec = re.split(r"\s+--", line)[0].strip()  # per-line options (--hash=...)
        req = parse_requirement(spec)
        if req is None:
            out.skip(n, f"{spec}: not a requirement cuaudit can read (a path or URL?)")
            continue
        if not req.applies_here():
            continue  # not for this interpreter: pip would not install it either
        if req.url:
            out.skip(n, f"{spec}: a direct URL, not a release of the index")
            continue
        version = req.pinned()
        if version is None:
            out.skip(n, f"{spec}: not pinned to one version (==): which wheel pip would install is not known "
                        "before resolving; pin it (pip-compile, pip freeze) to audit it")
            continue
        out.pins.append((n, f"{req.name}=={version}"))
    return out


def _read_pylock(path: str) -> PinnedSet:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]

    out = PinnedSet(path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    packages = data.get("packages")
    if not isinstance(packages, list):
        raise ConfigError(f"{path}: no [[packages]] array (PEP 751)")
    from packaging.markers import InvalidMarker, Marker

    for pkg in packages:
        if not isinstance(pkg, dict) or not isinstance(pkg.get("name"), str):
            continue
        name, version = pkg["name"], pkg.get("version")
        marker = pkg.get("marker")
        if isinstance(marker, str):
            try:
                if not Marker(marker).evaluate():
                    continue
            except InvalidMarker:
                pass
        if not isinstance(version, str) or not version:
            out.skip(None, f"{name}: no version in the lock file (a directory, VCS or archive source)")
            continue
        out.pins.append((0, f"{name}=={version}"))
    return out

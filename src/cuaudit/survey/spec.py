"""The survey specification (``SPEC.toml``): which packages, which of their releases, which wheel.

```toml
[survey]
platform = "cp311-manylinux_x86_64"        # optional (the default); --platform overrides
index-url = "https://pypi.org/simple"      # optional; default: pip's configured index-url

[packages]
"cuda-python" = ["12.6.0", "12.6.1"]                   # exactly these releases
"cupy-cuda11x" = ">=12,<13.1"                          # a PEP 440 range
"rmm-cu12" = { last = 4 }                              # the newest N releases
"cuda-bindings" = { since = "2025-01-01", versions = "<13" }   # uploaded since DATE (within a range)
```

A table may combine ``versions`` (a list or a range), ``last`` and
``since``; ``prereleases = true`` admits pre-releases (an explicitly listed
version always is).  Errors are :class:`~cuaudit.model.ConfigError` naming
the package and the key.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cuaudit.model import ConfigError

DEFAULT_PLATFORM = "cp311-manylinux_x86_64"


@dataclass(frozen=True)
class PackageSelection:
    """Which releases of one package the survey covers."""

    name: str  # canonical (PEP 503)
    versions: tuple[str, ...] = ()  # explicit list (empty: not restricted by a list)
    specifier: str = ""  # PEP 440 range ("" admits every version)
    last: int | None = None
    since: _dt.date | None = None
    prereleases: bool = False

    def choose(self, releases: Mapping[str, _dt.datetime | None]) -> list[str]:
        """The chosen versions among ``releases`` (version -> first upload time), oldest first."""
        parsed: list[tuple[Version, str]] = []
        for v in releases:
            try:
                parsed.append((Version(v), v))
            except InvalidVersion:
                continue  # a legacy version string no installer would pick either
        wanted = {Version(v) for v in self.versions}
        spec = SpecifierSet(self.specifier)
        chosen = []
        for ver, raw in sorted(parsed):
            if wanted:
                if ver not in wanted:
                    continue
            elif ver.is_prerelease and not self.prereleases:
                continue
            if self.specifier and not spec.contains(ver, prereleases=True):
                continue
            if self.since is not None:
                uploaded = releases[raw]
                if uploaded is None:
                    raise ConfigError(f"{self.name}: `since` needs upload times, and the index gives none "
                                      f"(PEP 700: use the JSON simple API or the PyPI index)")
                if uploaded.date() < self.since:
                    continue
            chosen.append(raw)
        if self.last is not None:
            chosen = chosen[-self.last:] if self.last else []
        return chosen


@dataclass(frozen=True)
class SurveySpec:
    packages: tuple[PackageSelection, ...]
    platform: str = DEFAULT_PLATFORM
    index_url: str | None = None
    source: str = ""


def load_spec(path: str) -> SurveySpec:
    from cuaudit.config import load_toml

    return parse_spec(load_toml(path), source=path)


def parse_spec(data: Mapping[str, Any], *, source: str = "<spec>") -> SurveySpec:
    unknown = set(data) - {"survey", "packages"}
    if unknown:
        raise ConfigError(f"{source}: unknown table(s) {', '.join(sorted(unknown))} (expected [survey] and [packages])")
    head = data.get("survey", {})
    if not isinstance(head, Mapping) or set(head) - {"platform", "index-url"}:
        raise ConfigError(f"{source}: [survey] takes `platform` and `index-url` only")
    packages = data.get("packages")
    if not isinstance(packages, Mapping) or not packages:
        raise ConfigError(f"{source}: [packages] must name at least one package")
    selections = tuple(_selection(name, value, source) for name, value in packages.items())
    names = [s.name for s in selections]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: a package is named twice (names are compared normalised, PEP 503)")
    platform = head.get("platform", DEFAULT_PLATFORM)
    if not isinstance(platform, str):
        raise ConfigError(f"{source}: [survey] platform must be a string such as {DEFAULT_PLATFORM!r}")
    index_url = head.get("index-url")
    if index_url is not None and not isinstance(index_url, str):
        raise ConfigError(f"{source}: [survey] index-url must be a string")
    return SurveySpec(selections, platform, index_url, source)


def _selection(name: str, value: Any, source: str) -> PackageSelection:
    where = f"{source}: packages.{name}"
    canonical = canonicalize_name(name)
    if isinstance(value, str):
        return PackageSelection(canonical, specifier=_specifier(value, where))
    if isinstance(value, list):
        return PackageSelection(canonical, versions=_versions(value, where))
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a list of versions, a range string or a table")
    extra = set(value) - {"versions", "last", "since", "prereleases"}
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(extra))} (versions, last, since, prereleases)")
    versions: tuple[str, ...] = ()
    specifier = ""
    raw = value.get("versions")
    if isinstance(raw, list):
        versions = _versions(raw, where)
    elif isinstance(raw, str):
        specifier = _specifier(raw, where)
    elif raw is not None:
        raise ConfigError(f"{where}.versions: a list of versions or a range string")
    last = value.get("last")
    if last is not None and (not isinstance(last, int) or isinstance(last, bool) or last < 1):
        raise ConfigError(f"{where}.last: a positive integer")
    since = value.get("since")
    if isinstance(since, _dt.datetime):
        since = since.date()
    elif isinstance(since, str):
        try:
            since = _dt.date.fromisoformat(since)
        except ValueError:
            raise ConfigError(f"{where}.since: a date, YYYY-MM-DD") from None
    elif since is not None and not isinstance(since, _dt.date):
        raise ConfigError(f"{where}.since: a date, YYYY-MM-DD")
    pre = value.get("prereleases", False)
    if not isinstance(pre, bool):
        raise ConfigError(f"{where}.prereleases: true or false")
    return PackageSelection(canonical, versions, specifier, last, since, pre)


def _specifier(text: str, where: str) -> str:
    try:
        return str(SpecifierSet(text))
    except InvalidSpecifier:
        raise ConfigError(f"{where}: {text!r} is neither a list of versions nor a PEP 440 range") from None


def _versions(values: Iterable[Any], where: str) -> tuple[str, ...]:
    out = []
    for v in values:
        if not isinstance(v, str):
            raise ConfigError(f"{where}: versions are strings, got {v!r}")
        try:
            Version(v)
        except InvalidVersion:
            raise ConfigError(f"{where}: {v!r} is not a valid version") from None
        out.append(v)
    return tuple(out)

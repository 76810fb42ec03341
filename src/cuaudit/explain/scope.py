"""What an explanation audits: the distributions the error names, not the whole environment.

A traceback names modules (its frames, its import lines, the module in the
message); each module belongs to one installed distribution, found from the
files its RECORD lists.  The audit then reads those distributions (plus the
library wheels when libraries must be resolved) with only the rule families
the failure kind needs, through the engine like every other command.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from cuaudit.model import MemberKind

if TYPE_CHECKING:  # pragma: no cover
    from cuaudit.config import Config
    from cuaudit.finish import Report
    from cuaudit.inputs.environment import Environment, InstalledDistribution

_EXT = re.compile(r"(\.cpython-[^./]+|\.abi3|\.cp\d+[^./]*)?\.(so|pyd)$")


@dataclass
class Installed:
    """The distributions of one environment, indexed by the modules and files they install."""

    environment: "Environment"
    _top: dict[str, list["InstalledDistribution"]] = field(default_factory=dict)

    @classmethod
    def load(cls, python: str | None) -> "Installed":
        from cuaudit.inputs.environment import load_environment

        return cls(load_environment(python))

    @property
    def python(self) -> str:
        return self.environment.info.python

    def _index(self) -> dict[str, list["InstalledDistribution"]]:
        if not self._top:
            for dist in self.environment.distributions:
                for m in dist.members:
                    head = m.path.split("/", 1)[0]
                    if head.endswith((".dist-info", ".egg-info", ".data")) or head == "..":
                        continue
                    name = _EXT.sub("", head[:-3] if head.endswith(".py") else head)
                    bucket = self._top.setdefault(name, [])
                    if dist not in bucket:
                        bucket.append(dist)
        return self._top

    def owners(self, module: str) -> list["InstalledDistribution"]:
        """Distributions that install files of ``module``'s top-level package (namespace packages: several)."""
        return list(self._index().get(module.split(".")[0], ()))

    def owner_of_file(self, path: str) -> "InstalledDistribution | None":
        """The distribution that installed this file (an absolute path under a site directory)."""
        path = os.path.normpath(path)
        for dist in self.environment.distributions:
            site = os.path.normpath(dist.ref.path)
            if path.startswith(site + os.sep):
                rel = os.path.relpath(path, site).replace(os.sep, "/")
                if dist.member(rel) is not None:
                    return dist
        return None

    def module_files(self, module: str) -> list[tuple["InstalledDistribution", str]]:
        """(distribution, member) of the files that implement ``module`` (a .py, a package, an extension)."""
        rel = module.replace(".", "/")
        out = []
        for dist in self.owners(module):
            for m in dist.members:
                p = m.path
                if p in (rel + ".py", rel + "/__init__.py") or (
                    m.kind is MemberKind.ELF and p.startswith(rel + ".") and "/" not in p[len(rel):]
                ):
                    out.append((dist, p))
        return out

    def version_of(self, name: str) -> str | None:
        from packaging.utils import canonicalize_name

        want = canonicalize_name(name)
        for dist in self.environment.distributions:
            if canonicalize_name(dist.ref.name) == want:
                return dist.ref.version
        return None

    def matching(self, pattern: str) -> list["InstalledDistribution"]:
        """Distributions whose normalised name matches a regular expression."""
        from packaging.utils import canonicalize_name

        rx = re.compile(pattern)
        return [d for d in self.environment.distributions if rx.search(canonicalize_name(d.ref.name))]

    def library_providers(self) -> list["InstalledDistribution"]:
        """Distributions that ship shared libraries outside Python packages (nvidia-*, *.libs, cuda-*)."""
        out = []
        for dist in self.environment.distributions:
            name = dist.ref.name.lower()
            if name.startswith(("nvidia-", "nvidia_", "cuda-", "cuda_", "cutensor", "cudnn")):
                out.append(dist)
        return out


def audit_scope(
    installed: Installed | None,
    dists: Iterable["InstalledDistribution"],
    *,
    families: tuple[str, ...],
    config: "Config",
    paths: Iterable[str] = (),
    target_archs: tuple[str, ...] = (),
) -> "Report":
    """Audit ``dists`` (inside their environment) and ``paths`` with the rule ``families`` only."""
    from cuaudit.engine import audit
    from cuaudit.inputs.environment import Environment

    # the failure kind decides the rules; the user's per-path ignores, baseline and severities still apply
    config = dataclasses.replace(config, select=tuple(families), extend_select=(), ignore=(), extend_ignore=())
    if target_archs:
        config = dataclasses.replace(config, target_archs=tuple(target_archs))
    unique = list(dict.fromkeys(dists))
    env = None
    if installed is not None and unique:
        info = installed.environment.info
        if len(unique) < len(installed.environment.distributions):
            info = dataclasses.replace(info, complete=False)  # the others are installed, just not audited
        env = Environment(info, unique)
    return audit(list(paths), env=env, config=config, command="explain")

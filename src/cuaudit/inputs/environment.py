"""Installed distributions of an environment, inspected without importing them.

The interpreter is asked only for its paths, with ``-S`` (no ``site``: no
``.pth`` file runs) and ``-E`` off so that ``PYTHONPATH`` counts as it would
for the user.  ``.pth`` files are then read, not executed: their path lines
are followed, their ``import`` lines are never run.  Distributions are found
from their ``.dist-info``/``.egg-info`` metadata; each one's members are the
files its RECORD lists under its site directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import IO

from cuaudit.inputs import Artifact, classify, stat_key
from cuaudit.model import ArtifactKind, ArtifactRef, EnvironmentInfo, Member

#: Environment variables that decide where libraries are found.
ENVIRON_KEYS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", "PATH", "VIRTUAL_ENV")

_QUERY = r"""
import json, os, site, sys, sysconfig
# With -S, site.venv() has not run: find the virtual environment ourselves.
venv = None
cfg = {}
for d in (os.path.dirname(sys.executable), os.path.dirname(os.path.dirname(sys.executable))):
    p = os.path.join(d, "pyvenv.cfg")
    if os.path.isfile(p):
        venv = d
        for line in open(p, encoding="utf-8", errors="replace"):
            k, _, v = line.partition("=")
            cfg[k.strip().lower()] = v.strip()
        break
prefix = venv or sys.prefix
def libs(base, scheme=None):
    # Debian/Ubuntu patch the default scheme to posix_local (dist-packages); inside a venv the
    # interpreter would use the "venv" scheme, which -S does not activate: name it.
    kw = {"scheme": scheme} if scheme and scheme in sysconfig.get_scheme_names() else {}
    paths = sysconfig.get_paths(vars={"base": base, "platbase": base}, **kw)
    return [paths["purelib"], paths["platlib"]]
if venv is not None:
    site_dirs = libs(prefix, "venv") + libs(prefix, "posix_prefix")
else:
    site_dirs = list(site.getsitepackages()) + libs(prefix)
if venv is not None and cfg.get("include-system-site-packages", "false").lower() == "true":
    site_dirs += list(site.getsitepackages([sys.base_prefix])) + libs(sys.base_prefix)
user = None
if venv is None and site.check_enableusersite() is not False:
    user = site.getusersitepackages()
seen = []
for d in site_dirs:
    if d not in seen:
        seen.append(d)
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d.%d" % sys.version_info[:3],
    "implementation": sys.implementation.name,
    "platform": sysconfig.get_platform(),
    "prefix": prefix,
    "site_dirs": seen,
    "user_site": user if user and os.path.isdir(user) else None,
    "sys_path": [p for p in sys.path if p],
}))
"""


class InterpreterError(Exception):
    pass


def query_interpreter(python: str, timeout: float = 60) -> dict:
    try:
        proc = subprocess.run(
            [python, "-S", "-c", _QUERY], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{python} does not run: {exc}") from exc
    if proc.returncode != 0:
        raise InterpreterError(f"{python} exited with {proc.returncode}: {proc.stderr.strip()[-500:]}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise InterpreterError(f"{python} printed no paths ({proc.stdout[-200:]!r})") from exc


def read_pth_paths(site_dir: str) -> list[str]:
    """Directories a site dir's .pth files add; their ``import`` lines are skipped, never run."""
    out: list[str] = []
    try:
        names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(site_dir, name), encoding="utf-8", errors="replace") as fh:
                lines = fh.read(1 << 20).splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                continue
            path = os.path.normpath(os.path.join(site_dir, line))
            if os.path.isdir(path):
                out.append(path)
    return out


@dataclass
class Environment:
    info: EnvironmentInfo
    distributions: list["InstalledDistribution"]


def load_environment(python: str | None = None) -> Environment:
    q = query_interpreter(python or sys.executable)
    site_dirs: list[str] = []
    for d in q["site_dirs"] + ([q["user_site"]] if q.get("user_site") else []):
        if d and os.path.isdir(d) and d not in site_dirs:
            site_dirs.append(d)
    search: list[str] = []
    for d in q["sys_path"] + site_dirs:
        if d not in search and os.path.isdir(d):
            search.append(d)
    for d in list(site_dirs):
        for extra in read_pth_paths(d):
            if extra not in search:
                search.append(extra)
    info = EnvironmentInfo(
        python=q["executable"],
        version=q["version"],
        implementation=q["implementation"],
        platform=q["platform"],
        prefix=q["prefix"],
        site_dirs=tuple(site_dirs),
        sys_path=tuple(search),
        environ={k: os.environ[k] for k in ENVIRON_KEYS if k in os.environ},
    )
    return Environment(info, find_distributions(search))


def find_distributions(paths: list[str]) -> list["InstalledDistribution"]:
    """First distribution of each name along ``paths``, as importlib.metadata finds it."""
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    out: list[InstalledDistribution] = []
    for dist in metadata.distributions(path=paths):
        try:
            name = dist.metadata["Name"] or ""
        except Exception:  # noqa: BLE001 - a broken METADATA is reported, not fatal
            name = ""
        meta_dir = str(getattr(dist, "_path", ""))
        if not name:
            name = os.path.basename(meta_dir).split("-")[0]
        key = canonicalize_name(name)
        if key in seen:
            continue
        seen.add(key)
        out.append(InstalledDistribution(dist, name, dist.version or "", meta_dir))
    out.sort(key=lambda d: canonicalize_name(d.ref.name))
    return out


class InstalledDistribution(Artifact):
    """An installed distribution: members are the RECORD's files under its site dir."""

    def __init__(self, dist: metadata.Distribution | None, name: str, version: str, meta_dir: str) -> None:
        site = os.path.dirname(meta_dir)
        super().__init__(ArtifactRef(ArtifactKind.INSTALLED, site, name, version))
        self.meta_dir = meta_dir
        self._record: list[str] | None = None
        if dist is not None:
            try:
                files = dist.files
            except Exception as exc:  # noqa: BLE001
                self.problem("CU002", f"{name}: unreadable RECORD ({exc})", member=os.path.basename(meta_dir))
                files = None
            self._record = None if files is None else [str(f) for f in files]

    def list_members(self) -> list[Member]:
        site = self.ref.path
        rel_meta = os.path.basename(self.meta_dir)
        files = self._record
        if files is None:
            # No RECORD (egg-info, some conda packages): the metadata folder and top-level packages.
            files = self._files_without_record()
        members: list[Member] = []
        seen: set[str] = set()
        for rel in files:
            rel = rel.replace("\\", "/")
            norm = os.path.normpath(rel).replace(os.sep, "/")
            if norm.startswith("../") or os.path.isabs(norm) or norm in seen:
                continue  # scripts in bin/ and headers live outside the site dir
            seen.add(norm)
            full = os.path.join(site, norm)
            try:
                st = os.stat(full)
            except OSError:
                if not norm.endswith(".pyc"):
                    self.skip(norm, "listed in RECORD but missing on disk")
                continue
            if norm.endswith(".pyc"):
                continue
            members.append(Member(norm, classify(norm), st.st_size, stat_key(st)))
        if not any(m.path.startswith(rel_meta + "/") for m in members):
            for name in ("METADATA", "PKG-INFO"):
                full = os.path.join(self.meta_dir, name)
                if os.path.isfile(full):
                    members.append(Member(f"{rel_meta}/{name}", classify(f"{rel_meta}/{name}"), os.path.getsize(full), stat_key(os.stat(full))))
        return members

    def _files_without_record(self) -> list[str]:
        site = self.ref.path
        out: list[str] = []
        top_level = os.path.join(self.meta_dir, "top_level.txt")
        tops: list[str] = []
        if os.path.isfile(top_level):
            with open(top_level, encoding="utf-8", errors="replace") as fh:
                tops = [t.strip() for t in fh if t.strip()]
        for root in [self.meta_dir] + [os.path.join(site, t) for t in tops]:
            if os.path.isfile(root + ".py"):
                out.append(os.path.relpath(root + ".py", site))
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                out += [os.path.relpath(os.path.join(dirpath, f), site) for f in filenames]
        return out

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.fs_path(path), "rb")

    def fs_path(self, path: str) -> str:
        return os.path.join(self.ref.path, *path.split("/"))

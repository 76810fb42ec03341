"""Installed distributions of an environment, inspected without importing them.

The interpreter is asked only for its paths, with ``-S`` (no ``site``: no
``.pth`` file runs) and ``-E`` off so that ``PYTHONPATH`` counts as it would
for the user.  ``.pth`` files are then read, not executed: their path lines
are followed, their ``import`` lines are never run.  Distributions are found
from their ``.dist-info``/``.egg-info`` metadata; each one's members are the
files its RECORD lists under its site directory.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Iterator

from cuaudit.inputs.artifact import Artifact, classify, identity_key, read_regular, stat_key
from cuaudit.inputs.budgets import budget
from cuaudit.inputs.identity import file_identity
from cuaudit.inputs.process import BoundExceeded, run_bounded
from cuaudit.model import ArtifactKind, ArtifactRef, EnvironmentInfo, Member
from cuaudit.names import canonical_name

if TYPE_CHECKING:  # pragma: no cover
    from importlib import metadata

#: a RECORD longer than this is read only this far
MAX_RECORD = budget("RECORD")
#: an editable install's source folder with more files than this is not walked further
MAX_EDITABLE_FILES = budget("EDITABLE_FILES")

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
    import shutil
    import tempfile

    # Resolved here: the query runs from another directory, and a bare name
    # is looked up on PATH as the user's shell would.
    python = os.path.abspath(python) if os.sep in python else (shutil.which(python) or python)
    if os.path.isdir(python):  # the environment's folder: its interpreter
        for candidate in ("bin/python3", "bin/python", "Scripts/python.exe", "python.exe"):
            if os.path.isfile(os.path.join(python, candidate)):
                python = os.path.join(python, candidate)
                break
    # `python -c` puts the working directory first on sys.path: run it from an
    # empty directory, or a `json.py` in the audited tree would be imported.
    # -E too: a PYTHONPATH that names the audited site-packages must not let a
    # `json.py` there run; its entries are added to the search path by
    # load_environment instead.  Only an interpreter that needs PYTHONHOME to
    # start at all is asked again without -E.
    try:
        with tempfile.TemporaryDirectory(prefix="cuaudit-query-") as empty:
            for flags in (["-E", "-S"], ["-S"]):
                proc = run_bounded([python, *flags, "-c", _QUERY], timeout=timeout, cwd=empty)
                if proc.returncode == 0:
                    break
    except (OSError, BoundExceeded, ValueError) as exc:
        raise InterpreterError(f"{python} does not run: {exc}") from exc
    stdout = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        raise InterpreterError(f"{python} exited with {proc.returncode}: {stderr.strip()[-500:]}")
    try:
        answer = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, RecursionError) as exc:
        raise InterpreterError(f"{python} printed no paths ({stdout[-200:]!r})") from exc
    why = _wrong_shape(answer)
    if why:
        raise InterpreterError(f"{python} printed an answer of the wrong shape ({why}): {stdout[-200:]!r}")
    return answer


#: the query's answer: key -> what its value must be
_SHAPE = {"executable": str, "version": str, "implementation": str, "platform": str, "prefix": str,
          "site_dirs": list, "sys_path": list, "user_site": (str, type(None))}


def _wrong_shape(answer: object) -> str:
    """What is wrong with an interpreter's answer ("" when it is what _QUERY prints)."""
    if not isinstance(answer, dict):
        return f"a {type(answer).__name__}, not an object"
    for key, kind in _SHAPE.items():
        if not isinstance(answer.get(key), kind):
            return f"'{key}' is {type(answer.get(key)).__name__}"
        if kind is list and not all(isinstance(v, str) and "\0" not in v for v in answer[key]):
            return f"'{key}' holds something other than paths"
    return ""


def read_pth_paths(site_dir: str) -> list[str]:
    """Directories a site dir's .pth files add; their ``import`` lines are skipped, never run."""
    out: list[str] = []
    try:
        names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
    except OSError:
        return out
    for name in names:
        data = read_regular(os.path.join(site_dir, name))
        if data is None:
            continue
        for line in data.decode("utf-8", "replace").splitlines():
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
    # PYTHONPATH comes first on the interpreter's sys.path (the query ran with -E)
    pythonpath = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for d in pythonpath + q["sys_path"] + site_dirs:
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
    seen: set[str] = set()
    out: list[InstalledDistribution] = []
    for meta_dir, dist in _metadata_dirs(paths):
        name, version = _name_version(meta_dir)
        if not name and read_regular(os.path.join(meta_dir, "METADATA"), 1) is not None:
            dist = dist or _path_distribution(meta_dir)
            try:
                name = dist.metadata["Name"] or ""
                version = dist.version or ""
            except Exception:  # noqa: BLE001 - a broken METADATA is reported, not fatal
                name, version = "", ""
        if not name:
            name = os.path.basename(meta_dir).split("-")[0]
            if not version:
                stem = os.path.basename(meta_dir).rsplit(".", 1)[0]
                version = stem.split("-")[1] if "-" in stem else ""
        key = canonical_name(name)
        if key in seen:
            continue
        seen.add(key)
        out.append(InstalledDistribution(dist, name, version, meta_dir))
    out.sort(key=lambda d: canonical_name(d.ref.name))
    return out


def _metadata_dirs(paths: list[str]) -> Iterator[tuple[str, "metadata.Distribution | None"]]:
    """The metadata folders along ``paths``, in the order of ``importlib.metadata.distributions(path=paths)``
    (by each folder's listing, grouped by normalised name), without importing it (16 ms of a cached
    ``env``'s start-up, for the email parser it brings); a path that cannot be listed as a folder (a zip)
    is left to it, which gives its distribution too."""
    import pathlib

    for root in paths:
        try:
            children = os.listdir(root or ".")
        except (OSError, ValueError):
            from importlib import metadata

            for dist in metadata.distributions(path=[root]):
                yield str(getattr(dist, "_path", "")), dist
            continue
        infos: dict[str, list[str]] = {}
        eggs: list[str] = []
        egg = os.path.basename(root).lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                name = low.rpartition(".")[0].partition("-")[0]
                # importlib.metadata's Prepared.normalize
                infos.setdefault(re.sub(r"[-_.]+", "-", name).lower().replace("-", "_"), []).append(child)
            elif egg and low == "egg-info":
                eggs.append(child)
        for child in itertools.chain(*infos.values(), eggs):
            yield str(pathlib.Path(root, child)), None


def _path_distribution(meta_dir: str) -> "metadata.Distribution":
    """importlib.metadata's view of a metadata folder, for what only it reads (a METADATA without a plain
    Name header, an egg-info's installed-files.txt)."""
    import pathlib
    from importlib import metadata

    return metadata.PathDistribution(pathlib.Path(meta_dir))


def _name_version(meta_dir: str) -> tuple[str, str]:
    """Name and Version from the header block of METADATA / PKG-INFO.

    Only the headers are read: ``dist.metadata`` parses the whole file (long
    descriptions included) with the email parser, twice per distribution,
    0.8 s of a 100-distribution environment.
    """
    for base in ("METADATA", "PKG-INFO"):
        path = os.path.join(meta_dir, base) if os.path.isdir(meta_dir) else meta_dir
        data = read_regular(path, 8 * 1024)
        if data is not None and len(data) == 8 * 1024 and b"\n\n" not in data:
            data = read_regular(path, 64 * 1024)  # the headers go on (most end in the first 8 KB: a description follows)
        if data is None:
            continue
        head = data.decode("utf-8", "replace")
        name = version = ""
        for line in head.split("\n\n", 1)[0].splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                continue
            key = key.strip().lower()
            if key == "name" and not name:
                name = value.strip()
            elif key == "version" and not version:
                version = value.strip()
        if name:
            return name, version
    return "", ""


def _read_record(path: str) -> list[str]:
    """The paths a RECORD file lists (first CSV column), as written by the installer."""
    import csv

    data = read_regular(path, MAX_RECORD)
    if data is None:
        raise OSError(f"{path}: not a regular file")
    text = data.decode("utf-8", "surrogateescape")
    if '"' not in text and "\0" not in text:
        # No field quoted (nearly every RECORD): each line's first field is the text before its first
        # comma, as csv.reader reads it (its line ends: \r\n, \r, \n), in half the time.  Whether it
        # refuses a NUL depends on the Python, and a field over its limit is an error: both left to it.
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if max(map(len, lines)) <= csv.field_size_limit():
            return [first for line in lines if (first := line.partition(",")[0])]
    return [row[0] for row in csv.reader(io.StringIO(text, newline="")) if row and row[0]]


class InstalledDistribution(Artifact):
    """An installed distribution: members are the RECORD's files under its site dir."""

    def __init__(self, dist: metadata.Distribution | None, name: str, version: str, meta_dir: str) -> None:
        site = os.path.dirname(meta_dir)
        super().__init__(ArtifactRef(ArtifactKind.INSTALLED, site, name, version))
        self.meta_dir = meta_dir
        self._record: list[str] | None = None
        #: a dist-info's RECORD is read when first needed (:attr:`record`): a snapshot's hit needs only its stat
        self._record_read = not meta_dir.endswith(".dist-info")
        try:
            if self._record_read and os.path.isfile(os.path.join(meta_dir, "installed-files.txt")):
                # egg-info installed by pip: paths relative to the egg-info
                files = (dist or _path_distribution(meta_dir)).files
                self._record = None if files is None else [str(f) for f in files]
            # else: an egg-info with only SOURCES.txt (a development checkout on
            # sys.path) lists paths relative to the project root, not to the
            # site dir: the top_level.txt packages are the members instead.
        except Exception as exc:  # noqa: BLE001 - a broken RECORD is reported, not fatal
            self._unreadable(exc)
        #: member path -> file outside the site dir (sources of an editable install)
        self._outside: dict[str, str] = {}
        #: what :meth:`listing_key` found of each RECORD path ((path, (mode, size, identity)), None for
        #: one gone), for the listing that follows it: each file is ``stat``'ed once per audit, and the
        #: members' keys are those the snapshot's content was made of
        self._stats: list[tuple[str, tuple[int, int, str] | None]] | None = None

    @property
    def record(self) -> list[str] | None:
        """The paths the RECORD lists (None: no RECORD, or one that cannot be read: CU002)."""
        if not self._record_read:
            self._record_read = True
            path = os.path.join(self.meta_dir, "RECORD")
            try:
                # RECORD read with csv: importlib.metadata's `files` builds a
                # PackagePath per line, 2 s of the 3 s `env` took on 43,000 files.
                self._record = _read_record(path) if os.path.isfile(path) else None
            except Exception as exc:  # noqa: BLE001 - a broken RECORD is reported, not fatal
                self._unreadable(exc)
        return self._record

    def _unreadable(self, exc: Exception) -> None:
        self.problem("CU002", f"{self.ref.name}: unreadable RECORD ({exc})", member=os.path.basename(self.meta_dir))
        self._record = None

    def list_members(self) -> list[Member]:
        members = self._site_members()
        seen = {m.path for m in members}
        for rel, full in self._editable_files().items():
            if rel in seen:
                continue
            try:
                st = os.stat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                self._outside[rel] = full
                members.append(Member(rel, classify(rel), st.st_size, stat_key(st, full)))
        return members

    def _editable(self) -> bool:
        """Whether this is an editable install (PEP 660)."""
        # `pip install -e` records it in direct_url.json; setuptools' editable
        # wheels also name their files __editable__* (installed from a wheel
        # file, direct_url.json says archive_info instead).
        return _editable_names(self.record or ()) or self._editable_by_direct_url()

    def _editable_by_direct_url(self) -> bool:
        try:
            return bool(json.loads(read_regular(os.path.join(self.meta_dir, "direct_url.json")) or b"{}")
                        .get("dir_info", {}).get("editable"))
        except (ValueError, AttributeError, RecursionError):
            return False

    def _editable_files(self) -> dict[str, str]:
        """Files of an editable install (PEP 660), by import path: its sources live
        outside the site dir, where a `.pth` path line or setuptools' finder
        module (`__editable___*_finder.py`, its MAPPING read with `ast`, never
        imported) points.  A GPU package built in place keeps its `.so` there."""
        if not self._editable():
            return {}
        site = self.ref.path
        tops = _top_level(self.meta_dir)
        packages: dict[str, str] = {}  # import name -> path of the package dir or module, without suffix
        for rel in self.record or []:
            full = os.path.join(site, rel)
            base = os.path.basename(rel)
            if rel.endswith(".pth") and "/" not in rel:
                for directory in _pth_path_lines(site, full):
                    for top in tops:
                        candidate = os.path.join(directory, top)
                        if os.path.isdir(candidate) or _module_files(candidate):
                            packages.setdefault(top, candidate)
            elif base.startswith("__editable___") and base.endswith("_finder.py"):
                for top, path in _finder_mapping(full).items():
                    packages.setdefault(top, path)
        if not packages and tops:
            self.skip(os.path.basename(self.meta_dir), "editable install whose sources could not be located")
        out: dict[str, str] = {}
        real_site = os.path.realpath(site)
        for top, path in sorted(packages.items()):
            real = os.path.realpath(path)
            if os.path.dirname(real) == real or (real_site + os.sep).startswith(real.rstrip(os.sep) + os.sep):
                # `/`, or a folder holding the environment itself: not a package's sources
                self.skip(os.path.basename(self.meta_dir), f"editable install maps {top!r} to {path}, which "
                          "holds the whole filesystem or the environment; not walked")
                continue
            if os.path.isdir(path):
                for dirpath, dirnames, filenames in os.walk(path):
                    if len(out) > MAX_EDITABLE_FILES:
                        self.skip(os.path.basename(self.meta_dir), f"editable install of {top!r}: more than "
                                  f"{MAX_EDITABLE_FILES} files under {path}; the rest is not read")
                        break
                    dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
                    rel_dir = os.path.relpath(dirpath, path).replace(os.sep, "/")
                    prefix = top if rel_dir == "." else f"{top}/{rel_dir}"
                    for f in filenames:
                        if not f.endswith(".pyc"):
                            out[f"{prefix}/{f}"] = os.path.join(dirpath, f)
            for module in _module_files(path):
                out[top + module[len(path):]] = module
        return out

    def _site_members(self) -> list[Member]:
        site = self.ref.path
        rel_meta = os.path.basename(self.meta_dir)
        files = self.record
        if files is None:
            # No RECORD (egg-info, some conda packages): the metadata folder and top-level packages.
            files = self._files_without_record()
        members: list[Member] = []
        stats, self._stats = self._stats, None
        if stats is None:
            paths = _site_paths(files)
            try:
                stats = list(_stat_all(site, paths))
            except OSError:  # the site dir itself cannot be opened: none of its files can be read
                stats = [(norm, None) for norm in paths]
        for norm, got in stats:
            if got is None:
                self.skip(norm, "listed in RECORD but missing on disk")
                continue
            mode, size, identity = got
            if not stat.S_ISREG(mode):
                # a FIFO or device where a file should be: opening it could block forever
                self.skip(norm, "not a regular file; not read")
                continue
            members.append(Member(norm, classify(norm), size, identity_key(identity, norm)))
        if not any(m.path.startswith(rel_meta + "/") for m in members):
            for name in ("METADATA", "PKG-INFO"):
                full = os.path.join(self.meta_dir, name)
                if os.path.isfile(full):
                    members.append(Member(f"{rel_meta}/{name}", classify(f"{rel_meta}/{name}"), os.path.getsize(full), stat_key(os.stat(full), f"{rel_meta}/{name}")))
        return members

    def listing_key(self, hint: Any = None) -> tuple[str, Any] | None:
        """What this distribution's listing follows from, without listing it: the RECORD's ``stat`` and
        paths, and the ``stat`` of each path (mode and :func:`~cuaudit.inputs.identity.file_identity`).
        Member kinds and keys follow from these and cuaudit's code.

        The hint is (the RECORD's identity, whether its names make an editable install, its paths):
        given the hint of the last run, a RECORD of the same identity is not read again.  None where
        the listing reads more than that (an egg-info, no RECORD or an unreadable one, an editable
        install's sources, the METADATA found outside a RECORD that lists none): those are listed.  A
        cached ``env`` of 49,549 files spent most of its time building the members this does without."""
        if not self.meta_dir.endswith(".dist-info"):
            return None
        try:
            st = os.stat(os.path.join(self.meta_dir, "RECORD"))
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        record = file_identity(st)
        if isinstance(hint, tuple) and len(hint) == 3 and hint[0] == record:
            _, by_names, paths = hint
        else:
            files = self.record
            if files is None:
                return None
            by_names, paths = _editable_names(files), _site_paths(files)
        if by_names or self._editable_by_direct_url():
            return None
        meta = os.path.basename(self.meta_dir) + "/"
        has_meta = False
        out = [self.meta_dir, record, repr(self.problems)]
        put = out.append
        try:
            stats = list(_stat_all(self.ref.path, paths))
        except OSError:
            return None
        for norm, got in stats:
            if got is None:
                put(f"{norm}\0-")
                continue
            mode, _size, identity = got
            if not has_meta and norm.startswith(meta) and stat.S_ISREG(mode):
                has_meta = True
            put(f"{norm}\0{mode}:{identity}")
        if not has_meta:
            return None
        self._stats = stats
        return "\n".join(out), (record, by_names, paths)

    def _files_without_record(self) -> list[str]:
        site = self.ref.path
        out: list[str] = []
        for root in [self.meta_dir] + [os.path.join(site, t) for t in _top_level(self.meta_dir)]:
            out += [os.path.relpath(m, site) for m in _module_files(root)]
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                out += [os.path.relpath(os.path.join(dirpath, f), site) for f in filenames]
        return out

    def open_member(self, path: str) -> IO[bytes]:
        return open(self.fs_path(path), "rb")

    def fs_path(self, path: str) -> str:
        outside = self._outside.get(path)
        return outside if outside is not None else os.path.join(self.ref.path, *path.split("/"))


def _stat_all(site: str, paths: list[str]) -> Iterator[tuple[str, tuple[int, int, str] | None]]:
    """(path, (mode, size, :func:`~cuaudit.inputs.identity.file_identity`)) of each relative path of the
    site dir, None for one that cannot be ``stat``'ed; OSError if the site dir cannot be opened.

    The paths are relative and never leave the site dir (:func:`_site_paths`): ``stat``'ed from it,
    the kernel walks only their own parts, not the site dir's every time (a sixth of the time)."""
    fd = os.open(site, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for norm in paths:
            try:
                st = os.stat(norm, dir_fd=fd)
            except OSError:
                yield norm, None
                continue
            yield norm, (st.st_mode, st.st_size, file_identity(st))
    finally:
        os.close(fd)


def _editable_names(files: list[str]) -> bool:
    """Whether a RECORD names the files of a setuptools editable wheel (``__editable__*``)."""
    return "__editable__" in "\n".join(files) and any(os.path.basename(rel).startswith("__editable__") for rel in files)


def _site_paths(files: list[str]) -> list[str]:
    """The paths of ``files`` (as a RECORD lists them) under the site dir, normalised, each once;
    bytecode left out (never analysed, not even stat'ed: importing rewrites it)."""
    out: list[str] = []
    seen: set[str] = set()
    for rel in files:
        if "\\" in rel:
            rel = rel.replace("\\", "/")
        if rel.startswith("/") or "./" in rel or "//" in rel or rel.endswith((".", "/")):
            norm = os.path.normpath(rel).replace(os.sep, "/")
            if norm.startswith("../") or os.path.isabs(norm):
                continue  # scripts in bin/ and headers live outside the site dir
        else:
            norm = rel  # already normal, as installers write nearly every line (listing 49 k files is the cached run)
        if norm in seen:
            continue
        seen.add(norm)
        if not norm.endswith(".pyc"):
            out.append(norm)
    return out


def _top_level(meta_dir: str) -> list[str]:
    data = read_regular(os.path.join(meta_dir, "top_level.txt"))
    if data is None:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    return [t.strip().replace("\\", "/") for t in lines if t.strip() and ".." not in t and not t.strip().startswith("/")]


def _module_files(base: str) -> list[str]:
    """``base.py`` and compiled modules ``base.cpython-311-x86_64-linux-gnu.so`` / ``base.so`` next to it."""
    directory, name = os.path.split(base)
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names
                  if n == name + ".py" or (n.startswith(name + ".") and n.endswith((".so", ".pyd"))))


def _pth_path_lines(site: str, pth: str) -> list[str]:
    data = read_regular(pth)
    if data is None:
        return []
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "import ", "import\t")):
            path = os.path.normpath(os.path.join(site, line))
            if os.path.isdir(path):
                out.append(path)
    return out


def _finder_mapping(path: str) -> dict[str, str]:
    """setuptools' ``MAPPING = {'pkg': '/src/pkg'}`` in an editable finder module, read with ``ast``."""
    import ast

    from cuaudit.compat import parse_tree

    data = read_regular(path)
    try:
        tree = parse_tree(data.decode("utf-8", "replace"), path) if data is not None else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    if tree is None:
        return {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "MAPPING" and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return {}
            if isinstance(value, dict):
                return {str(k): os.path.normpath(str(v)) for k, v in value.items()
                        if isinstance(k, str) and isinstance(v, str) and "/" not in k and os.path.isabs(str(v))}
    return {}

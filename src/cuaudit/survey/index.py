"""Releases and their files, from a package index (PEP 691 JSON / PEP 503 HTML) or a wheelhouse folder.

The index is pip's configured ``index-url`` (``PIP_INDEX_URL``, pip's config
files) unless the spec or ``--index-url`` names one.  ``file://`` indexes
work as pip reads them (``NAME/index.html``), and also with ``NAME/index.json``
in PEP 691 form.  Upload times (PEP 700) come only from the JSON form: a
``since`` selection needs them.

``cuaudit.inputs.index`` fetches *one* requirement for *this* interpreter
through ``pip download``; a survey knows the exact file it wants (for a
platform that may not be this machine's) with its hash from the listing, so
it downloads that URL itself and checks the hash.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging import tags as _tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from cuaudit.model import ConfigError

DEFAULT_INDEX = "https://pypi.org/simple"
_JSON = "application/vnd.pypi.simple.v1+json"


class IndexUnavailable(Exception):
    """The index could not be read for one package (a network or format problem)."""


@dataclass(frozen=True)
class ReleaseFile:
    """One downloadable file of one release."""

    package: str  # canonical name
    version: str
    filename: str
    url: str
    sha256: str = ""
    size: int | None = None
    upload_time: _dt.datetime | None = None
    yanked: bool = False


def configured_index_url() -> str:
    """pip's index-url (environment, then pip's configuration files), else PyPI."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    from cuaudit.inputs.process import BoundExceeded, run_bounded

    try:
        proc = run_bounded([sys.executable, "-m", "pip", "config", "list"], timeout=60)
        for line in proc.out.splitlines():
            key, sep, value = line.partition("=")
            value = value.strip().strip("'\"")
            if sep and value and key.strip().endswith(".index-url"):
                return value
    except (OSError, BoundExceeded):
        pass
    return DEFAULT_INDEX


# -- listing -----------------------------------------------------------------------


def list_files(index_url: str, package: str, *, timeout: float = 60) -> list[ReleaseFile]:
    """Every file the index lists for ``package`` (yanked ones included, marked)."""
    name = canonicalize_name(package)
    base = index_url.rstrip("/") + "/" + name + "/"
    if base.startswith("file:"):
        folder = urllib.request.url2pathname(urllib.parse.urlparse(base).path)
        for page, kind in (("index.json", "json"), ("index.html", "html")):
            path = os.path.join(folder, page)
            if os.path.exists(path):
                with open(path, "rb") as fh:
                    body = fh.read()
                return _parse(name, base, body, kind)
        raise IndexUnavailable(f"{name}: not in the index at {index_url} (no {folder}/index.html)")
    request = urllib.request.Request(base, headers={"Accept": f"{_JSON}, text/html;q=0.1"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            body = resp.read()
            kind = "json" if "json" in (resp.headers.get("Content-Type") or "") else "html"
    except OSError as exc:
        raise IndexUnavailable(f"{name}: cannot list {base}: {exc}") from None
    return _parse(name, base, body, kind)


def _parse(name: str, base: str, body: bytes, kind: str) -> list[ReleaseFile]:
    out = []
    if kind == "json":
        try:
            data = json.loads(body)
            entries = [(f["filename"], f["url"], f.get("hashes", {}).get("sha256", ""), f.get("size"),
                        f.get("upload-time"), bool(f.get("yanked"))) for f in data["files"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexUnavailable(f"{name}: the index's JSON page is not PEP 691: {exc}") from None
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        entries = []
        for href, yanked in parser.links:
            url, _, frag = href.partition("#")
            sha = frag[len("sha256="):] if frag.startswith("sha256=") else ""
            entries.append((urllib.parse.unquote(url.rsplit("/", 1)[-1]), url, sha, None, None, yanked))
    for filename, url, sha, size, uploaded, yanked in entries:
        version = version_of(filename, name)
        if version is None:
            continue
        when = None
        if uploaded:
            try:
                when = _dt.datetime.fromisoformat(uploaded.replace("Z", "+00:00"))
            except ValueError:
                when = None
        out.append(ReleaseFile(name, version, filename, urllib.parse.urljoin(base, url), sha, size, when, yanked))
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "a":
            a = dict(attrs)
            if a.get("href"):
                self.links.append((a["href"], "data-yanked" in a))


_SDIST = re.compile(r"^(?P<name>.+?)-(?P<version>[^-]+)\.(tar\.gz|zip|tar\.bz2)$")


def version_of(filename: str, name: str) -> str | None:
    """The version in a wheel or sdist file name of ``name``, or None (not this package's, or unreadable)."""
    if filename.endswith(".whl"):
        try:
            dist, version, _build, _tags_ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, ValueError):
            return None
        return str(version) if canonicalize_name(dist) == name else None
    m = _SDIST.match(filename)
    if m and canonicalize_name(m["name"]) == name:
        return m["version"]
    return None


def list_wheelhouse(folder: str, package: str) -> list[ReleaseFile]:
    """The wheels of ``package`` in a folder (no network: the device machine's scaling run)."""
    name = canonicalize_name(package)
    out = []
    for f in sorted(os.listdir(folder)):
        version = version_of(f, name) if f.endswith(".whl") else None
        if version is not None:
            path = os.path.abspath(os.path.join(folder, f))
            out.append(ReleaseFile(name, version, f, "file://" + urllib.request.pathname2url(path),
                                   size=os.path.getsize(path)))
    return out


def releases(files: list[ReleaseFile]) -> dict[str, _dt.datetime | None]:
    """version -> first upload time (None when the index gives no times).

    Yanked releases are kept: a release yanked after it broke its users (cuda-python 12.6.1)
    is exactly what a survey must show; reports mark them (:func:`yanked_versions`).
    """
    out: dict[str, _dt.datetime | None] = {}
    for f in files:
        prev = out.get(f.version)
        if f.version not in out or (f.upload_time and (prev is None or f.upload_time < prev)):
            out[f.version] = f.upload_time
    return out


def yanked_versions(files: list[ReleaseFile]) -> set[str]:
    """Releases whose every file is yanked (PEP 592)."""
    return {f.version for f in files} - {f.version for f in files if not f.yanked}


# -- choosing one wheel per release --------------------------------------------------


def platform_tags(platform: str) -> list[_tags.Tag]:
    """Tags a ``PYTAG-PLATFORM`` target accepts, best first (``cp311-manylinux_x86_64``).

    ``manylinux_ARCH`` and ``musllinux_ARCH`` stand for every glibc/musl
    version of that family; any other platform is taken as one literal tag.
    """
    pytag, sep, plat = platform.partition("-")
    m = re.fullmatch(r"cp(\d)(\d+)", pytag)
    if not sep or not m or not plat:
        raise ConfigError(f"platform {platform!r}: expected PYTAG-PLATFORM such as cp311-manylinux_x86_64")
    pyver = (int(m[1]), int(m[2]))
    family = re.fullmatch(r"(manylinux|musllinux)_(\w+)", plat)
    if family and family[1] == "manylinux":
        arch = family[2]
        plats = [f"manylinux_2_{minor}_{arch}" for minor in range(40, 4, -1)]
        plats += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}", f"linux_{arch}"]
    elif family:
        plats = [f"musllinux_1_{minor}_{family[2]}" for minor in range(5, -1, -1)]
    else:
        plats = [plat]
    cp = f"cp{pyver[0]}{pyver[1]}"
    out = list(_tags.cpython_tags(pyver, abis=[cp, "abi3", "none"], platforms=plats))
    out += list(_tags.compatible_tags(pyver, cp, platforms=plats))
    return out


def choose_wheel(files: list[ReleaseFile], accepted: list[_tags.Tag]) -> ReleaseFile | None:
    """The wheel of one release that best matches the target (None: no wheel for it); a yanked one only if all are."""
    rank = {t: i for i, t in enumerate(accepted)}
    best: tuple[int, ReleaseFile] | None = None
    for f in sorted(files, key=lambda f: f.yanked):
        if not f.filename.endswith(".whl") or (f.yanked and best is not None):
            continue
        try:
            wheel_tags = parse_wheel_filename(f.filename)[3]
        except (InvalidWheelFilename, ValueError):
            continue
        r = min((rank[t] for t in wheel_tags if t in rank), default=None)
        if r is not None and (best is None or r < best[0]):
            best = (r, f)
    return best[1] if best else None


# -- download --------------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    path: str
    bytes_fetched: int  # 0 when it came from the cache or a local file
    seconds: float


def download(f: ReleaseFile, folder: str, *, timeout: float = 600) -> Download:
    """The file on disk: a local ``file://`` path in place, else downloaded once into ``folder`` (hash checked)."""
    started = time.perf_counter()
    if f.url.startswith("file:"):
        path = urllib.request.url2pathname(urllib.parse.urlparse(f.url).path)
        if not os.path.exists(path):
            raise OSError(f"{path}: no such file")
        return Download(path, 0, time.perf_counter() - started)
    os.makedirs(folder, exist_ok=True)
    dest = os.path.join(folder, f.filename)
    if os.path.exists(dest):
        return Download(dest, 0, time.perf_counter() - started)
    part = f"{dest}.{os.getpid()}.part"
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(f.url, timeout=timeout) as resp, open(part, "wb") as out:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if f.sha256 and digest.hexdigest() != f.sha256:
            raise OSError(f"{f.filename}: sha256 {digest.hexdigest()} differs from the index's {f.sha256}")
        size = os.path.getsize(part)
        os.replace(part, dest)
    finally:
        if os.path.exists(part):
            os.remove(part)
    return Download(dest, size, time.perf_counter() - started)

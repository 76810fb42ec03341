"""``NAME==VERSION``: fetch a distribution from the configured package index.

pip does the talking (its configuration, index URLs, credentials and proxies
apply).  Wheels come from ``pip download --only-binary=:all:``; when a
release has no wheel for this platform, its sdist is located through pip's
package finder and downloaded as a file.  ``pip download`` of an sdist would
prepare its metadata, which runs its build backend: never done here.
Downloads are cached under the cuaudit cache directory.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import tempfile

from typing import Any

from cuaudit.inputs.artifact import Artifact
from cuaudit.inputs.process import BoundExceeded, run_bounded, run_watched

_REQ = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")

#: Runs in a pip subprocess: print the URL of NAME==VERSION's sdist.
_FIND_SDIST = r"""
import sys
from pip._internal.commands import create_command
name, version = sys.argv[1].split("==")
cmd = create_command("download")
options, _ = cmd.parse_args(["--no-deps", "--no-binary", ":all:", sys.argv[1]])
with cmd.main_context():
    session = cmd.get_default_session(options)
    finder = cmd._build_package_finder(options=options, session=session)
    for c in finder.find_all_candidates(name):
        if str(c.version) == version and c.link.filename.endswith((".tar.gz", ".zip", ".tar.bz2")):
            url = c.link.url.split("#")[0]
            dest = sys.argv[2] + "/" + c.link.filename
            resp = session.get(url)
            resp.raise_for_status()
            with open(dest + ".part", "wb") as fh:
                fh.write(resp.content)
            import os
            os.replace(dest + ".part", dest)
            print(dest)
            break
    else:
        sys.exit(f"no sdist for {sys.argv[1]}")
"""


def looks_like_requirement(spec: str) -> bool:
    return bool(_REQ.match(spec))


def download_dir(spec: str, cache_dir: str | None) -> str:
    from cuaudit.store import default_cache_dir

    from packaging.utils import canonicalize_name

    name, version = spec.split("==")
    return os.path.join(cache_dir or default_cache_dir(), "downloads", f"{canonicalize_name(name)}-{version}")


def fetch_requirement(spec: str, *, cache_dir: str | None = None, timeout: float = 600, progress: Any = None) -> Artifact:
    """The artifact for ``NAME==VERSION`` (downloaded once, then from the cache)."""
    from cuaudit.inputs.file import MissingArtifact
    from cuaudit.inputs.sdist import SdistArtifact, is_sdist_name
    from cuaudit.inputs.wheel import WheelArtifact

    dest = os.path.abspath(download_dir(spec, cache_dir))
    os.makedirs(dest, exist_ok=True)

    def found() -> Artifact | None:
        files = sorted(f for f in os.listdir(dest) if not f.endswith(".part") and not f.startswith("."))
        for f in files:
            if f.endswith(".whl"):
                return WheelArtifact(os.path.join(dest, f))
        for f in files:
            if is_sdist_name(f):
                return SdistArtifact(os.path.join(dest, f))
        return None

    if (art := found()) is not None:
        _mark_used(dest)
        return art
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    errors = []
    try:
        # Into a scratch folder, then moved: an interrupted download never
        # leaves a truncated wheel that later runs would take for the release.
        with tempfile.TemporaryDirectory(dir=dest, prefix=".part-") as scratch:
            # with a progress bar: the bytes pip has written so far
            run = functools.partial(run_watched, progress=progress, label=f"Downloading {spec}") if progress else run_bounded
            wheel = run(
                pip + ["download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off", "-q", "-d", scratch,
                       spec],
                timeout=timeout, cwd=scratch,
            )
            for name in os.listdir(scratch):
                if name.endswith(".whl"):
                    os.replace(os.path.join(scratch, name), os.path.join(dest, name))
        if wheel.returncode == 0 and (art := found()) is not None:
            return art
        errors.append(_last_line(wheel.err))
        sdist = run_bounded([sys.executable, "-c", _FIND_SDIST, spec, dest], timeout=timeout, cwd=dest)
        if sdist.returncode == 0 and (art := found()) is not None:
            return art
        errors.append(_last_line(sdist.err))
    except (OSError, BoundExceeded) as exc:
        errors.append(str(exc))
    # a failed fetch leaves nothing behind: no partial file, no empty folder
    from cuaudit.store import remove_leftovers

    remove_leftovers(cache_dir, only=dest, min_age=0)
    return MissingArtifact(spec, "could not be fetched from the package index: " + "; ".join(e for e in errors if e), code="CU010")


def _mark_used(dest: str) -> None:
    """Record the download's last use (least-recently-used pruning of the cache)."""
    try:
        with open(os.path.join(dest, ".used"), "a"):
            pass
        os.utime(os.path.join(dest, ".used"))
    except OSError:
        pass


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""

"""Inputs: turn what the user names into artifacts (sets of members).

One module per input kind: ``wheel.py``, ``sdist.py``, ``tree.py``,
``file.py``, ``environment.py`` (installed distributions) and ``index.py``
(``NAME==VERSION`` fetched from the configured index).  Every artifact
implements the small :class:`Artifact` interface; problems found while
listing (a corrupt zip, a member named ``../../etc/passwd``) are CU0xx
findings in ``artifact.problems``, never exceptions, and never abort the scan.

Nothing here imports or runs the code being audited.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from cuaudit.inputs.artifact import (  # noqa: F401 - the inputs' public names
    Artifact,
    classify,
    file_identity,
    is_symlink_mode,
    is_test_path,
    key_text,
    read_regular,
    stat_key,
    unsafe_member_name,
)


def resolve(specs: Iterable[str], *, exclude: Iterable[str] = (), cache_dir: str | None = None,
            progress: Any = None) -> list[Artifact]:
    """Artifacts for command-line inputs: paths, or ``NAME==VERSION`` requirements."""
    # Each kind's module is imported when an input of that kind comes: a wheel's audit
    # needs neither tarfile (sdists) nor the index's subprocess machinery (start-up).
    from cuaudit.inputs.file import FileArtifact, MissingArtifact

    exclude = tuple(exclude)
    out: list[Artifact] = []
    for spec in specs:
        try:
            if not os.path.lexists(spec):
                from cuaudit.inputs.index import fetch_requirement, looks_like_requirement

                if looks_like_requirement(spec):
                    out.append(fetch_requirement(spec, cache_dir=cache_dir, progress=progress))
                    continue
                hint = ""
                if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?([<>=!~]=?.*)?", spec) and "/" not in spec:
                    hint = " (to audit a release from the package index, give NAME==VERSION with an exact version)"
                out.append(MissingArtifact(spec, "does not exist" + hint))
            elif os.path.isdir(spec):
                from cuaudit.inputs.tree import TreeArtifact

                out.append(TreeArtifact(spec, exclude=exclude))
            elif not os.path.isfile(spec):
                # A FIFO, socket or device: opening it may block forever or never end.
                out.append(MissingArtifact(spec, "is not a regular file (FIFO, socket or device); not read"))
            elif spec.endswith(".whl"):
                from cuaudit.inputs.wheel import WheelArtifact

                out.append(WheelArtifact(spec))
            else:
                from cuaudit.inputs.sdist import SdistArtifact, is_sdist_name

                out.append(SdistArtifact(spec) if is_sdist_name(spec) else FileArtifact(spec))
        except Exception as exc:  # noqa: BLE001 - one bad input never stops the scan
            out.append(MissingArtifact(spec, f"internal error while opening it: {type(exc).__name__}: {exc}", code="CU011"))
    return out


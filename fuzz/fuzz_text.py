"""Text metadata: pyproject.toml (TOML), METADATA / PKG-INFO, and an installed
distribution's RECORD, top_level.txt, .pth files and editable finder: the
first input byte picks the file."""

import os
import tempfile

from _common import extract, instrumented, main

with instrumented():
    import cuaudit.facts.build  # noqa: F401
    import cuaudit.facts.metadata  # noqa: F401
    import cuaudit.facts.pyproject  # noqa: F401
    from cuaudit.inputs import environment

_SCRATCH = tempfile.mkdtemp(prefix="cuaudit-fuzz-text-")
_META = os.path.join(_SCRATCH, "demo-1.0.dist-info")
os.makedirs(_META, exist_ok=True)


def _installed(name: str, data: bytes) -> None:
    """The environment's readers of one installed file (never imported, never run)."""
    path = os.path.join(_META if name != "x.pth" else _SCRATCH, name)
    with open(path, "wb") as fh:
        fh.write(data)
    if name == "RECORD":
        environment._read_record(path)
    elif name == "METADATA":
        environment._name_version(_META)
    elif name == "top_level.txt":
        environment._top_level(_META)
    elif name == "x.pth":
        environment.read_pth_paths(_SCRATCH)
    elif name == "__editable___demo_finder.py":
        environment._finder_mapping(path)


TARGETS = (
    lambda d: extract(("pyproject", "build", "promotion_requirements", "suppressions"), "pyproject.toml", d),
    lambda d: extract(("metadata",), "demo-1.0.dist-info/METADATA", d),
    lambda d: extract(("metadata",), "PKG-INFO", d),
    lambda d: extract(("build", "suppressions"), "setup.cfg", d),
    lambda d: _installed("RECORD", d),
    lambda d: _installed("METADATA", d),
    lambda d: _installed("top_level.txt", d),
    lambda d: _installed("x.pth", d),
    lambda d: _installed("__editable___demo_finder.py", d),
)


def test_one_input(data: bytes) -> None:
    if data:
        TARGETS[data[0] % len(TARGETS)](data[1:])


if __name__ == "__main__":
    main(test_one_input)

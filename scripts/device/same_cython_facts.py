"""The cython-capi facts of every shared object without a ``PyInit_`` export under the given folders, read
with and without the early exit of ``facts.cython._exports_module_init``: the two must be equal.

    python scripts/device/same_cython_facts.py SITE_PACKAGES...

Prints how many such objects were read, how many differ (each named on stderr) and the time each way.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))

from cuaudit.facts import cython  # noqa: E402
from cuaudit.formats.elf import image_of_bytes, map_file  # noqa: E402


def shared_objects(roots: list[str]):  # type: ignore[no-untyped-def]
    """The ELF files the cython-capi extractor applies to (``CythonCapiExtractor.applies``)."""
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if not name.endswith(".so") or os.path.islink(path):
                    continue
                if name.startswith("lib") and ".cpython-" not in name and ".abi3." not in name:
                    continue
                with open(path, "rb") as fh:
                    if fh.read(4) == b"\x7fELF":
                        yield path


def timed_read(path: str, early_exit: bool) -> tuple[object, float]:
    real = cython._exports_module_init
    if not early_exit:
        cython._exports_module_init = lambda elf: True
    start = time.perf_counter()
    try:
        return cython.read_image(image_of_bytes(map_file(path), path)), time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - a problem is compared like a fact
        return repr(exc), time.perf_counter() - start
    finally:
        cython._exports_module_init = real


def main(roots: list[str]) -> None:
    read = differ = 0
    spent = {True: 0.0, False: 0.0}
    for path in shared_objects(roots):
        if cython._exports_module_init(image_of_bytes(map_file(path), path)):
            continue
        read += 1
        (new, t_new), (old, t_old) = timed_read(path, True), timed_read(path, False)
        spent[True] += t_new
        spent[False] += t_old
        if new != old:
            differ += 1
            print("DIFF", path, old, file=sys.stderr)
    print(f"{read} modules without PyInit_, {differ} differ; old {spent[False]:.2f}s new {spent[True]:.3f}s")


if __name__ == "__main__":
    main(sys.argv[1:])

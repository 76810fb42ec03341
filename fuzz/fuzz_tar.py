"""Tar reader (inputs/sdist.py): gzip/bzip2/xz/plain streams, long names, pax headers, links, budgets."""

import os
import tempfile

from _common import EXPECTED, instrumented, main

with instrumented():
    from cuaudit.inputs.sdist import SdistArtifact

_DIR = tempfile.mkdtemp(prefix="cuaudit-fuzz-tar-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def test_one_input(data: bytes) -> None:
    path = os.path.join(_DIR, "demo-1.0.tar.gz")  # the name only; tarfile detects the compression
    with open(path, "wb") as fh:
        fh.write(data)
    art = SdistArtifact(path)
    for m in art.members:
        try:
            with art.open_member(m.path) as fh:
                fh.read()
        except EXPECTED:
            pass


if __name__ == "__main__":
    main(test_one_input)

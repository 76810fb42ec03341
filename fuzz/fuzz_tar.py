"""Tar reader (inputs/sdist.py): gzip/bzip2/xz/plain streams, long names, pax headers, links, budgets."""

import os
import tempfile

from _common import instrumented, main, read_archive

with instrumented():
    from cuaudit.inputs.sdist import SdistArtifact

_DIR = tempfile.mkdtemp(prefix="cuaudit-fuzz-tar-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def test_one_input(data: bytes) -> None:
    read_archive(SdistArtifact, os.path.join(_DIR, "demo-1.0.tar.gz"), data)  # tarfile detects the compression


if __name__ == "__main__":
    main(test_one_input)

"""Zip reader (inputs/wheel.py): end record, central directory, member checks, inflating every member."""

import os
import tempfile

from _common import instrumented, main, read_archive

with instrumented():
    from cuaudit.inputs.wheel import WheelArtifact

_PATH = os.path.join(tempfile.mkdtemp(prefix="cuaudit-fuzz-zip-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None),
                     "demo-1.0-py3-none-any.whl")


def test_one_input(data: bytes) -> None:
    read_archive(WheelArtifact, _PATH, data)


if __name__ == "__main__":
    main(test_one_input)

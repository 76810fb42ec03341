"""Zip reader (inputs/wheel.py): end record, central directory, member checks, inflating every member."""

import os
import tempfile

from _common import EXPECTED, instrumented, main

with instrumented():
    from cuaudit.inputs.wheel import WheelArtifact

_PATH = os.path.join(tempfile.mkdtemp(prefix="cuaudit-fuzz-zip-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None),
                     "demo-1.0-py3-none-any.whl")


def test_one_input(data: bytes) -> None:
    with open(_PATH, "wb") as fh:
        fh.write(data)
    art = WheelArtifact(_PATH)
    for m in art.members:
        try:
            with art.open_member(m.path) as fh:
                while fh.read(1 << 20):
                    pass
        except EXPECTED:
            pass


if __name__ == "__main__":
    main(test_one_input)

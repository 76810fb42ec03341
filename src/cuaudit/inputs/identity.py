"""The identity of a file's bytes on disk (what content keys and open-archive checks compare)."""

from __future__ import annotations

import os


def file_identity(st: os.stat_result) -> str:
    """The identity of a file's bytes on disk, without reading them.

    Device, inode, size, mtime and ctime: anyone may set a file's mtime
    (``touch -d``), but ctime only the kernel, to now, on every change of
    content or metadata; so a file replaced or rewritten in place never
    matches what was recorded for the old bytes, whatever its size and mtime.
    """
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"

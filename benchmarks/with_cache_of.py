"""Run a command with a fresh copy of another run's fact cache.

``python with_cache_of.py CACHE_DIR COPY_DIR cmd args...``: what ``cuaudit env`` of a new virtual
environment of the same packages costs when the cache holds what an audit of the first one left
(its facts are found by content, ``workers._ByContent``: every key of identity differs).  The copy is
made for each run, so that no run finds what the one before it wrote; the command replaces this
process (``exec``): the harness measures it, plus the copy (about 0.1 s for 160 MB).
"""

from __future__ import annotations

import os
import shutil
import sys


def main() -> None:
    cache, copy, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    shutil.rmtree(copy, ignore_errors=True)
    os.makedirs(copy)
    for suffix in ("", "-wal", "-shm"):
        path = os.path.join(cache, "facts.sqlite3" + suffix)
        if os.path.exists(path):
            shutil.copyfile(path, os.path.join(copy, "facts.sqlite3" + suffix))
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()

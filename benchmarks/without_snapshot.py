"""Run a command after dropping the environment snapshots from a cuaudit cache.

``python without_snapshot.py CACHE_DIR cmd args...``: what ``cuaudit env`` costs
when its fact cache is filled but the snapshot is gone (after any change to one
installed file, see ``src/cuaudit/snapshot.py``).  The command replaces this
process (``exec``): the harness measures it, plus the few milliseconds of the drop.
"""

from __future__ import annotations

import os
import sqlite3
import sys


def main() -> None:
    cache, argv = sys.argv[1], sys.argv[2:]
    path = os.path.join(cache, "facts.sqlite3")
    if os.path.exists(path):
        db = sqlite3.connect(path)
        db.execute("DELETE FROM facts WHERE key LIKE 'snapshot:%'")
        db.commit()
        db.close()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()

"""``python -m cuaudit``: the same as the ``cuaudit`` command."""

import os
import sys

# `python -m` puts the working directory first on sys.path: drop it before
# anything else is imported, so an audited tree's `json.py` is never loaded.
_cwd = os.getcwd()
while sys.path and sys.path[0] in ("", ".", _cwd):
    del sys.path[0]

from cuaudit.cli import entry  # noqa: E402

if __name__ == "__main__":
    entry()

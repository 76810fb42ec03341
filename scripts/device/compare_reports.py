"""Compare `cuaudit env --format json` reports of one environment (the GPU session scripts).

    python compare_reports.py FIRST.json OTHER.json ...

Prints each report's stats, whether the reports are identical apart from them, and the first
report's findings per code and per severity.
"""

from __future__ import annotations

import collections
import json
import sys


def main(paths: list[str]) -> None:
    docs = []
    for path in paths:
        with open(path) as fh:
            d = json.load(fh)
        print(path.rsplit("/", 1)[-1], dict(d.get("stats", {})))
        d.pop("stats", None)
        docs.append(d)
    print("reports identical apart from stats:", all(d == docs[0] for d in docs))
    findings = docs[0]["findings"] if docs else []
    print("findings per code:", dict(sorted(collections.Counter(f["code"] for f in findings).items())))
    print("by severity:", dict(collections.Counter(f["severity"] for f in findings)))


if __name__ == "__main__":
    main(sys.argv[1:])

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
    same = all(d == docs[0] for d in docs)
    print("reports identical apart from stats:", same)
    if not same:  # which findings differ, against the first report (what a reader asks next)
        first = {json.dumps(f, sort_keys=True) for f in docs[0]["findings"]}
        for path, d in zip(paths[1:], docs[1:]):
            other = {json.dumps(f, sort_keys=True) for f in d["findings"]}
            name = path.rsplit("/", 1)[-1]
            for where, diff in ((f"only in {paths[0].rsplit('/', 1)[-1]}", first - other), (f"only in {name}", other - first)):
                for line in sorted(diff)[:5]:
                    print(f"  {where}: {line[:300]}")
    findings = docs[0]["findings"] if docs else []
    print("findings per code:", dict(sorted(collections.Counter(f["code"] for f in findings).items())))
    print("by severity:", dict(collections.Counter(f["severity"] for f in findings)))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()

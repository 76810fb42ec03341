"""Baselines: accept today's findings once, fail CI only on new ones.

A baseline records each finding's fingerprint (code, distribution name,
member, symbol and key: no versions, no message text), so it survives
version bumps of the audited package.  Findings in binaries carry no
comments; this is how they are silenced.
"""

from __future__ import annotations

import json
from typing import Iterable

from cuaudit.model import ConfigError, Finding

BASELINE_VERSION = 1


def write_baseline(path: str, findings: Iterable[Finding]) -> int:
    entries = sorted(
        {
            f.fingerprint(): {
                "fingerprint": f.fingerprint(),
                "code": f.code,
                "artifact": f.location.artifact.name or f.location.artifact.path.rsplit("/", 1)[-1],
                "member": f.location.member,
                "symbol": f.location.symbol,
                "message": f.message,
            }
            for f in findings
        }.values(),
        key=lambda e: (e["code"], e["artifact"], e["member"] or "", e["fingerprint"]),
    )
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"version": BASELINE_VERSION, "tool": "cuaudit", "findings": entries}, fh, indent=2)
        fh.write("\n")
    return len(entries)


def read_baseline(path: str) -> set[str]:

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("version") != BASELINE_VERSION:
            raise ConfigError(f"{path}: baseline version {data.get('version')!r} is not {BASELINE_VERSION}")
        return {e["fingerprint"] for e in data["findings"]}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read baseline: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: not a cuaudit baseline file ({exc})") from None

"""Report renderers (report/*): every format, with names, messages and evidence taken from the input.

Input-controlled text reaches reports as member names (bytes that are not
UTF-8 arrive as surrogate escapes), messages, evidence and symbols.  Besides
crashes this harness counts a terminal escape: an ESC, CSI or bidi override
from the input that reaches text, github or sarif output unescaped.
"""

import json
import sys

import atheris

from _common import instrumented, main

with instrumented():
    from cuaudit.config import Config
    from cuaudit.finish import Report
    from cuaudit.model import (Applicability, ArtifactKind, ArtifactRef, Edit, Finding, Fix, Location, Severity,
                               Skipped)
    from cuaudit.report import render

FORMATS = ("text", "json", "sarif", "github", "html")
#: found by this harness; printed once each (see docs/security.md), the run goes on
ESCAPES = {}
STRICT = "--strict-escapes" in sys.argv


def _text(fdp: atheris.FuzzedDataProvider) -> str:
    raw = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64))
    return raw.decode("utf-8", "surrogateescape")


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    kinds = list(ArtifactKind)
    ref = ArtifactRef(kinds[fdp.ConsumeIntInRange(0, len(kinds) - 1)], "/in/" + _text(fdp), _text(fdp), _text(fdp))
    findings, skipped = [], []
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        member = _text(fdp) if fdp.ConsumeBool() else None
        loc = Location(ref, member, fdp.ConsumeIntInRange(0, 5) or None, fdp.ConsumeIntInRange(0, 5) or None)
        fix = None
        if fdp.ConsumeBool():
            fix = Fix(_text(fdp), (Edit(member or "m.py", 1, 1, 1, 1, _text(fdp)),), Applicability.SAFE)
        sev = list(Severity)[fdp.ConsumeIntInRange(0, 2)]
        findings.append(Finding("CU00" + str(fdp.ConsumeIntInRange(1, 9)), sev, _text(fdp), loc, fix,
                                {_text(fdp): _text(fdp)}, _text(fdp)))
    if fdp.ConsumeBool():
        skipped.append(Skipped(Location(ref, _text(fdp)), _text(fdp)))
    report = Report(findings=findings, skipped=skipped, artifacts=[ref], config=Config(), rules=["CU001"])
    color = fdp.ConsumeBool()
    for fmt in FORMATS:
        if fmt == "html" and len(data) % 64:
            continue  # one html render costs 70 ms (30x the others together): one input in 64
        out = render(report, fmt, color=color)
        if fmt == "json":
            json.loads(out)
        if color and fmt == "text":
            out = render(report, fmt, color=False)  # colour is ours; an escape without it came from the input
        if fmt in ("text", "github") and any(c in out for c in ("\x1b", "\x9b", "\u202e", "\u2066")):
            ESCAPES.setdefault(fmt, out)
            if STRICT:
                raise AssertionError(f"{fmt}: a control or bidi character from the input reached the output")
            if len(ESCAPES) == 1 or fmt not in ESCAPES:
                print(f"ESCAPE in {fmt} output: {out[:200]!r}", file=sys.stderr)


if __name__ == "__main__":
    main(test_one_input)

"""CU0xx: problems with the input itself.

These are found by the inputs (listing an archive) and the extractors
(reading a member), not by rule logic; they are registered here so that
every code has its documentation, severity and selection like any rule.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Sequence

from cuaudit.model import ArtifactKind, EnvironmentInfo, Finding, Severity
from cuaudit.rules import Rule


class InputRule(Rule):
    """Base of the CU0xx rules (defines no code: not registered)."""

    emitted_by_engine = True


class UnreadableFile(InputRule):
    """## What it does
    Reports a path or member that cannot be read at all: it does not exist,
    permission is denied, the disk returned an I/O error, or it is a FIFO,
    socket or device (never opened: reading one can block forever).

    ## Why is this bad?
    Nothing in it was analysed, so a clean report would be a false "all clear".

    ## Example
    ```
    $ cuaudit check dist/missing.whl
    dist/missing.whl: CU001 dist/missing.whl: does not exist
    ```

    ## Use instead
    Give a path that exists and that the auditing user can read.

    ## Fix safety
    No automatic fix.
    """

    code = "CU001"
    name = "unreadable-file"
    summary = "A file or member could not be read"
    severity = Severity.ERROR


class CorruptArchive(InputRule):
    """## What it does
    Reports an archive (wheel, sdist) or a member of one that is corrupt or
    truncated: a bad central directory, a cut gzip/bzip2/xz stream or tar, a
    CRC mismatch, a member whose data runs past the end of the file, an
    encrypted member or one compressed with a method installers cannot read,
    an unreadable RECORD.

    ## Why is this bad?
    pip refuses such a wheel, or installs only part of it.  A truncated
    download in a wheelhouse looks like a release until someone installs it.

    ## Example
    A wheel cut short during upload: `cupy-13.0.0-...whl: corrupt or truncated zip (File is not a zip file)`.

    ## Use instead
    Rebuild or re-download the archive and compare its hash with the index's.

    ## Fix safety
    No automatic fix.
    """

    code = "CU002"
    name = "corrupt-archive"
    summary = "An archive or archive member is corrupt or truncated"
    severity = Severity.ERROR


class UnsafeArchiveMember(InputRule):
    """## What it does
    Reports archive members whose names are absolute or climb out of the
    archive with `..`, symbolic and hard links, device files and duplicated
    names.  cuaudit never writes or follows them; they are left out of the
    analysis.

    ## Why is this bad?
    An installer that trusts such names writes outside the target directory
    (a "zip slip").  Wheels have no legitimate use for any of them.

    ## Example
    A wheel member named `../../../../home/user/.bashrc`.

    ## Use instead
    Build the archive with the standard tools (`python -m build`,
    `pip wheel`), which never produce these entries.

    ## Fix safety
    No automatic fix.
    """

    code = "CU003"
    name = "unsafe-archive-member"
    summary = "An archive member with an unsafe name or type (path traversal, link, device)"
    severity = Severity.ERROR


class OversizedMember(InputRule):
    """## What it does
    Reports members whose declared size is absurd (above 8 GiB, or a
    compression ratio above 1000:1 past 64 MiB) and members whose data
    overlap another entry's: the marks of zip bombs.  They are not read.
    For a tar sdist the bound applies to all members together, since
    walking past a member inflates it even unread; the listing stops there.
    Every other budget of `docs/security.md` is reported here too, among
    them the CPU time one pass may spend on one member (`ANALYSIS_SECONDS`,
    60 s: real members take 3 s at most): past it the pass is stopped, that
    member lacks its facts, and the finding is never cached, since a faster
    machine or a larger budget may finish it.

    ## Why is this bad?
    Inflating them exhausts memory or disk in every tool that trusts the
    archive, installers included.  A member that takes a pass minutes is
    built to stall the tools that read it (or hits a bug of ours).

    ## Example
    A 10 KB wheel whose `big.so` declares 50 GB.

    ## Use instead
    Ship real files; split genuinely huge data out of the wheel.

    ## Fix safety
    No automatic fix.
    """

    code = "CU004"
    name = "oversized-member"
    summary = "An archive member declares an absurd size or overlaps another (zip bomb)"
    severity = Severity.ERROR


class CorruptBinary(InputRule):
    """## What it does
    Reports an ELF file that is truncated or internally inconsistent: headers
    or tables that point past its end, a dynamic section without its string
    table.

    ## Why is this bad?
    The dynamic loader refuses it (`invalid ELF header`, `file too short`),
    so `import` of the extension module fails everywhere.

    ## Example
    `_core.cpython-311-x86_64-linux-gnu.so: ELF program headers extend past the end of the file`.

    ## Use instead
    Rebuild the binary; check the upload and any post-processing (strip,
    patchelf) that rewrote it.

    ## Fix safety
    No automatic fix.
    """

    code = "CU005"
    name = "corrupt-binary"
    summary = "A binary (ELF) is truncated or corrupt"
    severity = Severity.ERROR


class ContentMismatch(InputRule):
    """## What it does
    Reports a file whose content is not what its name says: a `.whl` that is
    not a zip, a `.tar.gz` that is not a tar, a wheel whose file name is not
    PEP 427, a `.so` that is not ELF, a `.py` that is not text.

    ## Why is this bad?
    Tools pick their handling from the name; a mislabelled file is either
    skipped silently or breaks at install or import time.

    cuaudit parses Python with the grammar of the interpreter it runs on.
    When `env --python` names an environment of a newer Python, a source
    that does not parse may be newer syntax (`f"{d["a"]}"` is Python 3.12):
    it is reported as a warning that names the Python to run cuaudit with.

    ## Example
    `libfoo.so` that is an HTML error page saved by a failed download.

    ## Use instead
    Fix the build or download step that produced the file.

    ## Fix safety
    No automatic fix.
    """

    code = "CU006"
    name = "content-mismatch"
    summary = "A file's content does not match its name"
    severity = Severity.ERROR

    @classmethod
    def under_a_newer_python(cls, findings: Sequence[Finding], environment: EnvironmentInfo | None) -> list[Finding]:
        """``findings``, with each installed source of ``environment`` that did not parse made a warning
        that says why it may parse there, when that environment runs a newer Python than cuaudit.

        cuaudit parses with its own interpreter's grammar: ``f"{d["a"]}"`` is Python 3.12 and a syntax
        error to 3.11, so cuaudit on 3.11 (installed with pipx under the system's Python) called a 3.12
        environment's valid module "not valid Python" (an error).  What it cannot parse there it cannot
        check either way: the finding stays, as a warning naming the Python to run cuaudit with.
        """
        newer = _newer_than_cuaudit(environment)
        if newer is None:
            return list(findings)
        own = f"{sys.version_info[0]}.{sys.version_info[1]}"
        out = []
        for f in findings:
            if f.code == cls.code and f.evidence.get("extractor") == "format" and "not valid Python:" in f.message \
                    and f.location.artifact.kind is ArtifactKind.INSTALLED:
                f = replace(f, severity=Severity.WARNING, evidence={**f.evidence, "parsed_with": own, "environment_python": newer},
                            message=f"{f.message}; cuaudit parses Python {own} and this environment runs Python {newer}: "
                                    f"the source may be newer Python (run cuaudit on Python {newer} to check it)")
            out.append(f)
        return out


def _newer_than_cuaudit(environment: EnvironmentInfo | None) -> str | None:
    """The environment's Python as ``X.Y`` when it is newer than the one cuaudit runs on, else None."""
    if environment is None:
        return None
    try:
        major, minor = (int(x) for x in environment.version.split(".")[:2])
    except ValueError:
        return None
    return f"{major}.{minor}" if (major, minor) > sys.version_info[:2] else None


class InvalidProjectFile(InputRule):
    """## What it does
    Reports a `pyproject.toml` in an audited tree, sdist or wheel that is not
    valid TOML, at the line and column the parser stopped.

    ## Why is this bad?
    Every build front end fails on it: `pip install` of the sdist stops
    before building anything.

    ## Example
    `pyproject.toml: not valid TOML: Expected '=' after a key (at line 3, column 9)`.

    ## Use instead
    Fix the syntax; `python -c "import sys, tomllib; tomllib.load(sys.stdin.buffer)" < pyproject.toml` shows the error.

    ## Fix safety
    No automatic fix.
    """

    code = "CU007"
    name = "invalid-project-file"
    summary = "A project configuration file does not parse"
    severity = Severity.ERROR
    #: the pyproject extractor raises it (InputError("CU007")) while parsing
    needs = ("pyproject",)


class InterpreterFailed(InputRule):
    """## What it does
    Reports an interpreter given to `cuaudit env --python` that does not run
    or does not answer with its paths.  cuaudit starts it with `-S` (no
    `site`, so no `.pth` file runs) and asks only for `sys.path` and its
    site directories.

    ## Why is this bad?
    The environment could not be inspected; nothing in it was audited.

    ## Example
    `cuaudit env --python /opt/venv/bin/python` where the venv's base
    interpreter was removed.

    ## Use instead
    Point `--python` at a working interpreter of the environment.

    ## Fix safety
    No automatic fix.
    """

    code = "CU008"
    name = "interpreter-failed"
    summary = "The interpreter of the environment to audit does not run"
    severity = Severity.ERROR


class UnsupportedBinary(InputRule):
    """## What it does
    Reports a binary cuaudit reads but cannot analyse for a rule family: an
    ELF file for another machine (aarch64, ppc64le), a 32-bit object, a
    Cython generation or layout the static reader does not know.

    ## Why is this bad?
    The checks of that family did not run on it; the report says so rather
    than passing it silently.

    ## Example
    `libfoo.so: ELF machine AArch64 is not analysed for Cython C-API imports (x86-64 only)`.

    ## Use instead
    Audit on the platform's wheels, or use `--probe` where the family offers it.

    ## Fix safety
    No automatic fix.
    """

    code = "CU009"
    name = "unsupported-binary"
    summary = "A binary is not supported by an analysis"
    severity = Severity.INFO


class FetchFailed(InputRule):
    """## What it does
    Reports a `NAME==VERSION` input that could not be fetched from the
    configured package index (no such release, no wheel and no sdist, no
    network).  pip's configuration (index URL, credentials, proxy) applies.

    ## Why is this bad?
    The release was not audited.

    ## Example
    `cuaudit check cupy-cuda12x==99.0` → `could not be fetched from the package index: No matching distribution`.

    ## Use instead
    Check the name and version, and `pip config list` for the index in use.

    ## Fix safety
    No automatic fix.
    """

    code = "CU010"
    name = "fetch-failed"
    summary = "A NAME==VERSION input could not be fetched"
    severity = Severity.ERROR


class InternalError(InputRule):
    """## What it does
    Reports that cuaudit itself failed while analysing one file or running one
    rule.  The rest of the audit went on; this file or rule has no results.
    The submodule-trap rules (CU1xx) judge each package and each file apart: a
    failure on one is reported on its member, and the others keep their findings.
    It is reported even when the selection leaves CU011 out (`--select CU101`
    with a crashed CU101 must not read "No findings"); only an ignore that
    names it (`--ignore CU011`) hides it.

    ## Why is this bad?
    It is a bug in cuaudit: the report may miss findings for that file.

    ## Example
    `flags.so: internal error while analysing this file: IndexError: ... (at elf.py:210)`.

    ## Use instead
    Report it with the file and the message; `--select`/`--ignore` can skip
    the failing rule meanwhile.

    ## Fix safety
    No automatic fix.
    """

    code = "CU011"
    name = "internal-error"
    summary = "cuaudit failed on one file or rule (the audit went on)"
    severity = Severity.WARNING

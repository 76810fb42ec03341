"""Shared pieces of the atheris harnesses (see docs/security.md, "Fuzzing").

A harness feeds bytes to one reader the way the engine does and fails only on
what the engine would turn into CU011 (an exception other than the ones that
mean "this input is bad": InputError and the read errors the engine reports as
CU001/CU002).  libFuzzer's own limits catch the rest: ``-rss_limit_mb=1024``
(memory), ``-timeout=30`` (a hang).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import zipfile
import zlib
from typing import Callable

#: what a reader may raise for a bad input (the engine reports these as CU0xx, not CU011)
EXPECTED = (OSError, zipfile.BadZipFile, zlib.error, EOFError)


@contextlib.contextmanager
def instrumented():
    """Import cuaudit with coverage instrumentation; every extractor is loaded here, before the
    first input (on a starved core, importing them inside it was once timed as a 30 s hang)."""
    import atheris

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    with atheris.instrument_imports(include=["cuaudit"]):
        import cuaudit.facts

        cuaudit.facts.load_all()
        yield


def fuzz_extractors(names: tuple[str, ...], path: str) -> None:
    """The whole harness for extractors of one member: ``names`` run on each input as the member ``path``."""
    with instrumented():
        pass
    main(lambda data: extract(names, path, data) and None)


def extract(names: tuple[str, ...], path: str, data: bytes, fs_path: str | None = None) -> list:
    """Run the named extractors on one member holding ``data``, as the engine does."""
    from cuaudit import facts
    from cuaudit.facts import MemberReader
    from cuaudit.inputs import Artifact, classify
    from cuaudit.model import ArtifactKind, ArtifactRef, InputError, Member

    class OneMember(Artifact):
        def list_members(self):
            return [member]

        def open_member(self, p):
            return io.BytesIO(data)

        def fs_path(self, p):
            return fs_path

    member = Member(path, classify(path), len(data), "fuzz")
    art = OneMember(ArtifactRef(ArtifactKind.WHEEL, "/fuzz.whl", "fuzz", "1"))
    out = []
    for name in names:
        try:
            out.append(facts.get(name)().extract(MemberReader(art, member, None if fs_path else data)))
        except (InputError, *EXPECTED):
            pass
    return out


#: an input still running after this long is a hang (the issue's bound: 30 s per input)
HANG_SECONDS = 30


def _keep_going(test_one_input: Callable[[bytes], None], directory: str) -> Callable[[bytes], None]:
    """For a long campaign: record each distinct crash (exception type and the
    cuaudit line it came from) once, with its input, and go on fuzzing, so that
    one known bug does not end the run.  Short runs (tests) stop at the first."""
    import hashlib
    import traceback

    seen: set[tuple[str, str]] = set()
    os.makedirs(directory, exist_ok=True)

    import signal

    class Hang(Exception):
        pass

    def hang(*_):
        raise Hang(f"still running after {HANG_SECONDS} s")

    signal.signal(signal.SIGALRM, hang)

    def wrapped(data: bytes) -> None:
        signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
        try:
            test_one_input(data)
        except Exception as exc:  # noqa: BLE001 - recorded, then the campaign goes on
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/cuaudit/" in f.filename]
            where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "harness"
            sig = (type(exc).__name__, where)
            if sig not in seen:
                seen.add(sig)
                name = f"crash-{sig[0]}-{where.replace(':', '-')}-{hashlib.sha1(data).hexdigest()[:12]}"
                with open(os.path.join(directory, name), "wb") as fh:
                    fh.write(data)
                print(f"CRASH {sig[0]} at {where}: {str(exc)[:200]!r} -> {name}", file=sys.stderr, flush=True)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    return wrapped


def read_archive(artifact_type, path: str, data: bytes) -> None:
    """Write ``data`` to ``path``, list it as ``artifact_type`` and read every member to the end."""
    with open(path, "wb") as fh:
        fh.write(data)
    art = artifact_type(path)
    for m in art.members:
        try:
            with art.open_member(m.path) as fh:
                while fh.read(1 << 20):
                    pass
        except EXPECTED:
            pass


def main(test_one_input: Callable[[bytes], None]) -> None:
    import atheris

    keep = os.environ.get("CUAUDIT_FUZZ_KEEP_GOING")
    atheris.Setup(sys.argv, _keep_going(test_one_input, keep) if keep else test_one_input)
    atheris.Fuzz()

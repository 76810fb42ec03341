"""Read what a user pastes: one error line, or a whole traceback (pip's build log included).

Nothing here knows about failure kinds; it only extracts what the patterns
and the audit need: the frames (file, line, function), the modules those
frames and the import lines name, and the user's own files among them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?\s*$')
#: Cython frames name the module being initialised: `in init rmm.pylibrmm.device_buffer`
_CYTHON_INIT = re.compile(r"^init (?P<module>[A-Za-z_][\w.]*)$")
_IMPORT = re.compile(r"^\s*(?:from\s+(?P<from>[A-Za-z_][\w.]*)\s+import\b|import\s+(?P<imp>[A-Za-z_][\w., ]*))")
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt))(?::\s*(?P<message>.*))?$")
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<rel>.+)$")
_MODULE_SUFFIX = re.compile(r"(\.cpython-[^./]+|\.abi3|\.cp\d+[^./]*)?\.(py|pyx|pxd|pxi|so|pyd)$")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    source: str = ""

    @property
    def module(self) -> str | None:
        """The dotted module this frame runs in, when its file is under a site directory."""
        m = _CYTHON_INIT.match(self.function)
        if m:
            return m.group("module")
        s = _SITE.search(self.file)
        if s:
            return module_of_path(s.group("rel"))
        return None

    @property
    def in_library(self) -> bool:
        """Installed code, the standard library, or a Cython frame: not the user's own script."""
        f = self.file.replace("\\", "/")
        return (bool(_SITE.search(self.file)) or "/lib/python" in f or f.startswith("<")
                or _CYTHON_INIT.match(self.function) is not None or f.endswith((".pyx", ".pxd", ".pxi")))


@dataclass(frozen=True)
class ErrorText:
    """One pasted error, parsed."""

    text: str
    frames: tuple[Frame, ...]
    #: the last exception line (``ImportError: ...``), or the whole text when there is none
    exception: str
    exception_type: str

    @property
    def modules(self) -> tuple[str, ...]:
        """Modules the traceback runs in or imports, innermost last, without repeats."""
        out: list[str] = []
        for f in self.frames:
            for name in (f.module, *_imported(f.source)):
                if name and name not in out:
                    out.append(name)
        return tuple(out)

    @property
    def user_files(self) -> tuple[str, ...]:
        """The user's own source files named by the frames that exist here (the code to audit)."""
        out: list[str] = []
        for f in self.frames:
            if not f.in_library and f.file.endswith(".py") and os.path.isfile(f.file) and f.file not in out:
                out.append(f.file)
        return tuple(out)


def module_of_path(rel: str) -> str | None:
    """``cupy/cuda/nccl.cpython-311-x86_64-linux-gnu.so`` -> ``cupy.cuda.nccl`` (relative to a site dir)."""
    rel = rel.replace("\\", "/")
    stem = _MODULE_SUFFIX.sub("", rel)
    if stem == rel:
        return None
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    parts = stem.split("/")
    if not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _imported(source: str) -> list[str]:
    m = _IMPORT.match(source or "")
    if not m:
        return []
    if m.group("from"):
        return [m.group("from")] if not m.group("from").startswith(".") else []
    return [n.strip().split(" ")[0] for n in m.group("imp").split(",") if n.strip()]


def parse(text: str) -> ErrorText:
    lines = text.replace("\r\n", "\n").splitlines()
    frames: list[Frame] = []
    exception, etype = "", ""
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if m:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            source = nxt.strip() if nxt and not _FRAME.match(nxt) and nxt.startswith((" ", "\t")) else ""
            frames.append(Frame(m.group("file"), int(m.group("line")), (m.group("func") or "").strip(), source))
            continue
        e = _EXCEPTION.match(line.strip())
        if e and not line.startswith((" ", "\t")):
            exception, etype = line.strip(), e.group("type")
    if not exception:
        # a line that is an exception somewhere inside it (a log prefix), else the whole text
        for line in reversed(lines):
            e = re.search(r"\b([A-Z]\w*(?:Error|Exception)):\s*\S", line)
            if e:
                exception, etype = line[e.start():].strip(), e.group(1)
                break
        else:
            exception = " ".join(line.strip() for line in lines if line.strip())
    return ErrorText(text, tuple(frames), exception, etype.rsplit(".", 1)[-1])

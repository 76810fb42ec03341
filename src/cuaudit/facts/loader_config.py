"""The dynamic loader's own configuration: ``/etc/ld.so.cache`` and ``ld.so.conf``.

Both are members of the system evidence (:class:`cuaudit.inputs.evidence.SystemFiles`),
read on demand by the loader model (:mod:`cuaudit.analysis.loader`).
``ldconfig`` is never run: the cache is parsed as the loader reads it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping

from cuaudit.facts import Extractor, MemberReader
from cuaudit.model import Member

_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_MAGIC = b"ld.so-1.7.0"
#: ld.so.cache entry flags: FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
_FLAG_X8664 = 0x0303
MAX_CACHE_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class LdSoCache:
    """soname -> paths (x86-64 and untagged entries), in the cache's order."""

    entries: tuple[tuple[str, tuple[str, ...]], ...]

    def as_mapping(self) -> Mapping[str, tuple[str, ...]]:
        return dict(self.entries)


def parse_ld_so_cache(data: bytes) -> LdSoCache:
    """The entries of an ``ld.so.cache`` image; empty when it is not one."""
    start = 0
    if data.startswith(_OLD_MAGIC):
        (n,) = struct.unpack_from("<I", data, 12)
        start = 16 + n * 12
        start = (start + 7) & ~7
        idx = data.find(_NEW_MAGIC, start - 8 if start >= 8 else 0)
        if idx < 0:
            return LdSoCache(())
        start = idx
    if not data.startswith(_NEW_MAGIC, start):
        return LdSoCache(())
    out: dict[str, list[str]] = {}
    try:
        nlibs, _strlen = struct.unpack_from("<II", data, start + 20)
        base = start + 48
        for i in range(min(nlibs, 1 << 20)):
            flags, key, value, _os, _hw = struct.unpack_from("<iIIIQ", data, base + i * 24)
            if flags & 0xFF00 and flags != _FLAG_X8664:
                continue  # another ABI (i386, x32)
            k = data[key : data.index(b"\0", key)].decode("utf-8", "replace")
            v = data[value : data.index(b"\0", value)].decode("utf-8", "replace")
            out.setdefault(k, []).append(v)
    except (struct.error, ValueError):
        return LdSoCache(())
    return LdSoCache(tuple((k, tuple(v)) for k, v in out.items()))


class LdSoCacheExtractor(Extractor):
    name = "ld_so_cache"
    version = 1

    def applies(self, member: Member) -> bool:
        return member.path.endswith("ld.so.cache")

    def extract(self, reader: MemberReader) -> LdSoCache:
        return parse_ld_so_cache(reader.read(MAX_CACHE_BYTES))


@dataclass(frozen=True)
class LdSoConf:
    """An ``ld.so.conf`` file's lines, in order: ``("dir", path)`` or ``("include", glob)``."""

    lines: tuple[tuple[str, str], ...]


def parse_ld_so_conf(text: str) -> LdSoConf:
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line.split(None, 1)[1] if " " in line or "\t" in line else ""
            if pattern:
                out.append(("include", pattern))
        else:
            out.append(("dir", line))
    return LdSoConf(tuple(out))


class LdSoConfExtractor(Extractor):
    name = "ld_so_conf"
    version = 1

    def applies(self, member: Member) -> bool:
        return member.path.endswith("ld.so.conf") or "/ld.so.conf.d/" in member.path

    def extract(self, reader: MemberReader) -> LdSoConf:
        return parse_ld_so_conf(reader.read(1024**2).decode("utf-8", "replace"))

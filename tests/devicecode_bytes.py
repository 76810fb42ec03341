"""Fat binaries and minimal ELF files written by hand (no pytest here: fuzz/make_seeds.py builds seeds with them)."""

from __future__ import annotations

import struct


def entry(kind: int, sm: int, flags: int = 0x11, payload: bytes = b"\0" * 24, stored: int = 0, unc: int = 0,
          header_size: int = 64, payload_size: int | None = None) -> bytes:
    """One entry; ``header_size`` and ``payload_size`` may lie about what follows."""
    size = len(payload) if payload_size is None else payload_size
    head = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x101, header_size, size, stored, 0, 8, 1, sm, 0, 0, flags, 0, unc)
    return head + payload


def container(*entries: bytes, declared: int | None = None) -> bytes:
    """A container of ``entries``; ``declared`` may lie about its body's size."""
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body) if declared is None else declared) + body


def elf_with(sections: dict[str, bytes]) -> bytes:
    """A minimal 64-bit ELF holding the named PROGBITS sections (and its name table)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in list(sections) + [".shstrtab"])
    data = bytearray(b"\0" * 64)
    offsets = {}
    for name, blob in sections.items():
        data += b"\0" * (-len(data) % 8)
        offsets[name] = len(data)
        data += blob
    str_off = len(data)
    data += names
    data += b"\0" * (-len(data) % 8)
    shoff = len(data)
    shdrs = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for name, blob in sections.items():
        shdrs.append(struct.pack("<IIQQQQIIQQ", names.index(name.encode() + b"\0"), 1, 2, 0, offsets[name], len(blob), 0, 0, 8, 0))
    shdrs.append(struct.pack("<IIQQQQIIQQ", names.index(b".shstrtab\0"), 3, 0, 0, str_off, len(names), 0, 0, 1, 0))
    data += b"".join(shdrs)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, len(shdrs), len(shdrs) - 1)
    data[:64] = header
    return bytes(data)

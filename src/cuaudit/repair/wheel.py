"""Rewrite a wheel without its unused ``DT_NEEDED`` entries (what ``-Wl,--as-needed`` would have produced).

The edit is made in place in each ELF file's dynamic section, no patchelf:
the entries to drop are removed, the remaining ``DT_*`` entries shift down
in their order, and the freed slots at the end become ``DT_NULL``.  Nothing
else moves: the strings stay in ``.dynstr`` (unreferenced), sizes and
offsets are unchanged, so no relocation or symbol is touched.  Entries
needed through a symbol version (``.gnu.version_r``) are never removed (the
rule never reports them as unused).

The wheel's RECORD is rewritten with the new hashes and sizes; its file
name, tags and every other member are copied unchanged (same order, same
compressed bytes: members are copied raw, never re-compressed).
"""

from __future__ import annotations

import base64
import copy
import csv
import hashlib
import io
import os
import shutil
import struct
import tempfile
import zipfile
from dataclasses import dataclass, field

from cuaudit.facts import InputError
from cuaudit.formats.elf import DT_NEEDED, DT_NULL, DT_STRTAB, PT_DYNAMIC, PT_LOAD, _Layout


@dataclass(frozen=True)
class Removal:
    """Needed entries to drop from one member, with the evidence for each."""

    member: str
    libraries: tuple[str, ...]
    reasons: tuple[str, ...] = ()


@dataclass
class RepairResult:
    wheel: str
    output: str | None
    removals: list[Removal] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def remove_needed(data: bytes, names: set[str] | frozenset[str], path: str = "") -> tuple[bytes, list[str]]:
    """``data`` with the DT_NEEDED entries naming ``names`` removed; and the names removed.

    A malformed file is an InputError (CU005), never another exception.
    """
    try:
        return _remove_needed(data, names, path)
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise InputError("CU005", f"{path}: malformed ELF file ({exc}); not edited") from None


def _remove_needed(data: bytes, names: set[str] | frozenset[str], path: str) -> tuple[bytes, list[str]]:
    if data[:4] != b"\x7fELF":
        raise InputError("CU006", f"{path}: not an ELF file")
    L = _Layout(data[4], data[5] == 1)
    hdr = L.ehdr.unpack_from(data, 16)
    e_phoff, e_phentsize, e_phnum = hdr[4], hdr[8], hdr[9]
    loads, dyn = [], None
    for i in range(e_phnum):
        f = L.phdr.unpack_from(data, e_phoff + i * e_phentsize)
        if L.is64:
            p_type, p_offset, p_vaddr, p_filesz = f[0], f[2], f[3], f[5]
        else:
            p_type, p_offset, p_vaddr, p_filesz = f[0], f[1], f[2], f[4]
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dyn = (p_offset, p_filesz)
    if dyn is None:
        return data, []
    off, size = dyn
    n = size // L.dyn.size
    entries = [L.dyn.unpack_from(data, off + k * L.dyn.size) for k in range(n)]
    end = next((k for k, (t, _v) in enumerate(entries) if t == DT_NULL), n)
    live = entries[:end]
    strtab = next((v for t, v in live if t == DT_STRTAB), None)
    if strtab is None:
        raise InputError("CU005", f"{path}: dynamic section without DT_STRTAB")
    base = next((o + strtab - va for va, o, fs in loads if va <= strtab < va + fs), None)
    if base is None:
        raise InputError("CU005", f"{path}: DT_STRTAB is in no loadable segment")

    def string(v: int) -> str:
        e = data.index(b"\0", base + v)
        return data[base + v : e].decode("utf-8", "surrogateescape")

    kept, removed = [], []
    for t, v in live:
        if t == DT_NEEDED and string(v) in names:
            removed.append(string(v))
        else:
            kept.append((t, v))
    if not removed:
        return data, []
    out = bytearray(data)
    for k in range(n):
        t, v = kept[k] if k < len(kept) else (DT_NULL, 0)
        L.dyn.pack_into(out, off + k * L.dyn.size, t, v)
    return bytes(out), removed


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


#: Marks a repaired wheel in the PEP 427 build-tag slot: pip prefers it over the original of the
#: same version and tags, and nobody mistakes it for the file the project published.
BUILD_TAG_SUFFIX = "cuaudit"


def _build_tag(old: str | None) -> str:
    if old and old.endswith(BUILD_TAG_SUFFIX):
        return old
    return f"{old or '1'}{BUILD_TAG_SUFFIX}"


def repaired_name(filename: str) -> str:
    """``cupy-13.3.0-cp311-cp311-linux_x86_64.whl`` -> ``cupy-13.3.0-1cuaudit-cp311-cp311-linux_x86_64.whl``."""
    stem = filename[: -len(".whl")] if filename.endswith(".whl") else filename
    parts = stem.split("-")
    if len(parts) == 6:  # name-version-build-py-abi-plat
        parts[2] = _build_tag(parts[2])
    elif len(parts) == 5:
        parts.insert(2, _build_tag(None))
    else:
        return filename
    return "-".join(parts) + ".whl"


def with_build_tag(wheel_file: bytes) -> bytes:
    """The WHEEL metadata with its ``Build:`` line set to the repaired build tag (PEP 427)."""
    text = wheel_file.decode("utf-8", "replace")
    old = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.lower().startswith("build:")), None)
    lines = [line for line in text.splitlines() if not line.lower().startswith("build:")]
    lines.append(f"Build: {_build_tag(old)}")
    return ("\n".join(lines) + "\n").encode()


def rewrite_wheel(wheel: str, removals: list[Removal], out_dir: str | None, *, dry_run: bool = False) -> RepairResult:
    """Write the repaired wheel to ``out_dir`` under a build-tagged name (:func:`repaired_name`), with
    the removals applied and WHEEL's ``Build:`` and RECORD to match (nothing is written when dry_run)."""
    result = RepairResult(wheel, None)
    wanted = {r.member: r for r in removals}
    art = _sound_wheel(wheel)
    with zipfile.ZipFile(wheel) as src:
        infos = src.infolist()
        record_name = next((i.filename for i in infos if i.filename.endswith(".dist-info/RECORD")), None)
        edited: dict[str, bytes] = {}
        for info in infos:
            r = wanted.get(info.filename)
            if r is None:
                continue
            with art.open_member(info.filename) as fh:  # bounded, CRC checked
                data = fh.read()
            try:
                new, removed = remove_needed(data, set(r.libraries), info.filename)
            except InputError:
                result.skipped.append(info.filename)  # a member it cannot parse is copied unchanged
                continue
            if removed:
                edited[info.filename] = new
                result.removals.append(Removal(info.filename, tuple(removed), r.reasons))
            else:
                result.skipped.append(info.filename)
        if dry_run or not edited:
            return result
        wheel_name = next((i.filename for i in infos if i.filename.endswith(".dist-info/WHEEL")), None)
        if wheel_name:
            edited[wheel_name] = with_build_tag(src.read(wheel_name))
        os.makedirs(out_dir or ".", exist_ok=True)
        target = os.path.join(out_dir or ".", repaired_name(os.path.basename(wheel)))
        if os.path.abspath(target) == os.path.abspath(wheel):
            raise ValueError(f"refusing to overwrite the input wheel {wheel}; choose another -o DIR")
        record = None
        if record_name:
            rows = list(csv.reader(io.StringIO(src.read(record_name).decode("utf-8"))))
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            for row in rows:
                if row and row[0] in edited:
                    row = [row[0], _record_hash(edited[row[0]]), str(len(edited[row[0]]))]
                w.writerow(row)
            record = buf.getvalue().encode()
        # A new file of our own beside the target (O_EXCL, random name): a planted
        # `<target>.part` symlink would otherwise be written through, anywhere.
        fd, tmp = tempfile.mkstemp(prefix=".cuaudit-repair-", suffix=".part", dir=out_dir or ".")
        try:
            with os.fdopen(fd, "w+b") as out, zipfile.ZipFile(out, "w") as dst:
                _copy_members(src, art, infos, dst, edited, record_name, record)
            os.replace(tmp, target)  # replaces a link at `target` itself, never what it points to
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        result.output = target
    return result


def _sound_wheel(wheel: str):
    """The wheel as cuaudit reads it, or ValueError when a "repaired" copy would carry what it must not.

    A member named ``../x`` or ``/etc/x``, a symbolic link, an encrypted,
    duplicated, overlapping or oversized member, a corrupt archive: copied
    unchanged, it would come out blessed by a repair.  Refused instead.
    """
    from cuaudit.inputs.wheel import WheelArtifact

    art = WheelArtifact(wheel)
    art.members  # noqa: B018 - lists the archive, collecting its problems
    bad = [p for p in art.problems if p.code in ("CU001", "CU002", "CU003", "CU004")]
    if bad:
        raise ValueError(f"{os.path.basename(wheel)} is not repaired: " + "; ".join(p.message for p in bad[:5]))
    return art


def _copy_members(src, art, infos, dst, edited, record_name, record) -> None:
    for info in infos:
        if not info.filename.endswith("/") and info.filename not in edited and info.filename != record_name:
            # a copied member's bytes must be the ones its CRC-32 names (raw copies do not inflate)
            try:
                with art.open_member(info.filename) as fh:
                    while fh.read(1 << 20):
                        pass
            except zipfile.BadZipFile as exc:
                raise ValueError(f"{os.path.basename(art.ref.path)} is not repaired: {exc}") from None
    for info in infos:
        zi = zipfile.ZipInfo(info.filename, info.date_time)
        zi.compress_type = info.compress_type
        zi.external_attr = info.external_attr
        zi.create_system = info.create_system
        if info.filename in edited:
            dst.writestr(zi, edited[info.filename])
        elif info.filename == record_name and record is not None:
            dst.writestr(zi, record)
        elif not _copy_raw(src, info, dst):
            with (src.open(info) if info.filename.endswith("/") else art.open_member(info.filename)) as fin, \
                    dst.open(zi, "w", force_zip64=info.file_size > 2**31) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)


def _copy_raw(src: zipfile.ZipFile, info: zipfile.ZipInfo, dst: zipfile.ZipFile) -> bool:
    """Copy a member's compressed bytes as they are (no inflate/deflate); False if not possible.

    zipfile has no public raw copy; this writes the local header from the
    central-directory entry and registers the entry, as ``ZipFile.write`` does.
    The 90 MB cupy wheel: 30 s re-compressing, a second or two this way.
    """
    if info.file_size >= 0xFFFFFFFF or info.compress_size >= 0xFFFFFFFF or info.flag_bits & 0x1:
        return False  # zip64 sizes or encryption: let zipfile handle it
    fp = src.fp
    if fp is None:
        return False
    fp.seek(info.header_offset)
    header = fp.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        return False
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    data_start = info.header_offset + 30 + name_len + extra_len
    out = copy.copy(info)
    out.flag_bits &= ~0x08  # sizes go in the local header, no data descriptor
    out.extra = b""
    out.header_offset = dst.fp.tell()
    dst.fp.write(out.FileHeader(zip64=False))
    fp.seek(data_start)
    left = info.compress_size
    while left > 0:
        chunk = fp.read(min(1 << 20, left))
        if not chunk:
            raise zipfile.BadZipFile(f"{info.filename}: truncated member data")
        dst.fp.write(chunk)
        left -= len(chunk)
    dst.filelist.append(out)
    dst.NameToInfo[out.filename] = out
    # as ZipFile.write does: the next entry and the central directory go after this one
    dst.start_dir = dst.fp.tell()
    dst._didModify = True  # noqa: SLF001
    return True


def plan(wheel: str, config) -> list[Removal]:
    """The removals CU201 asks for in ``wheel`` (runs the static audit; nothing is imported)."""
    import dataclasses

    from cuaudit.engine import audit

    config = dataclasses.replace(config, select=("CU201",), extend_select=(), ignore=(), extend_ignore=(), baseline=None)
    report = audit([wheel], config=config, command="repair")
    by_member: dict[str, list[tuple[str, str]]] = {}
    for f in report.findings:
        if f.code != "CU201" or not f.location.member or f.evidence.get("verdict") == "constructors":
            continue  # a library loaded for its constructors is no over-linking: never removed
        by_member.setdefault(f.location.member, []).append((f.evidence.get("library", f.key), f.evidence.get("evidence", "")))
    return [
        Removal(m, tuple(lib for lib, _ in items), tuple(ev for _, ev in items)) for m, items in sorted(by_member.items())
    ]


__all__ = ["Removal", "RepairResult", "plan", "remove_needed", "rewrite_wheel"]

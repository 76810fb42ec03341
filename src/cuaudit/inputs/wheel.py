"""Wheels, read in place from the zip (never extracted)."""

from __future__ import annotations

import os
import struct
import zipfile
from typing import IO

from cuaudit.inputs.budgets import budget
from cuaudit.inputs._zip_member import MemberStream, ZipEntry
from cuaudit.inputs.artifact import Artifact, classify, file_identity, is_symlink_mode, key_text, unsafe_member_name
from cuaudit.model import ArtifactKind, ArtifactRef, Member

#: A member whose declared size is above this is not read (zip bombs).
MAX_MEMBER_SIZE = budget("MEMBER_SIZE")
#: ... nor one that inflates more than this ratio once past MIN_RATIO_SIZE.
MAX_RATIO = budget("RATIO")
MIN_RATIO_SIZE = budget("RATIO_FROM")


#: An archive declaring more entries than this is not listed (torch 2.8.0 has 12,098).
MAX_ENTRIES = budget("ENTRIES")


def _declared_entries(path: str) -> int:
    """The most entries the end-of-central-directory record allows (0 if none found)."""
    try:
        with open(path, "rb") as fh:
            record = zipfile._EndRecData(fh)  # reads only the end of the file
    except (OSError, AttributeError, struct.error, ValueError):
        return 0
    if not record:
        return 0
    # The count may lie low: zipfile parses the whole central directory whatever
    # it says, and each entry takes at least 46 bytes of it.
    return max(int(record[zipfile._ECD_ENTRIES_TOTAL]), int(record[zipfile._ECD_SIZE]) // 46)


#: stored, deflate, bzip2, lzma: what zipfile (and so pip) reads
_READABLE_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def parse_wheel_name(filename: str) -> tuple[str, str]:
    """(name, version) from a wheel's file name, or ("", "") if it is not one."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        name, version, _build, _tags = parse_wheel_filename(os.path.basename(filename))
    except (InvalidWheelFilename, ValueError):
        return "", ""
    return str(name), str(version)


#: Zip archives opened by this process, by (path, size, mtime).  Each chunk of
#: parallel extraction arrives in a worker as a fresh copy of its artifact;
#: without this, every chunk re-parsed the central directory (1 s for the
#: 11,500 entries of torch 2.8.0), which made `-j 2` slower than `-j 1`.
_OPEN_ZIPS: dict[tuple[str, str], zipfile.ZipFile] = {}
# A forked worker must not read through its parent's file descriptors: they
# share one file offset, and two processes seeking in it read each other's
# bytes (CRC errors, wrong facts).  Children start with no open zip.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_OPEN_ZIPS.clear)


def _open_zip(path: str, identity: str) -> zipfile.ZipFile:
    """The archive at ``path``, which must still be the file of that :func:`file_identity`.

    Member keys carry the identity taken when the archive was listed: reading
    another file's bytes under them (one swapped in mid-audit) would cache
    facts of those bytes for the listed ones.
    """
    key = (path, identity)
    zf = _OPEN_ZIPS.get(key)
    if zf is None:
        zf = zipfile.ZipFile(path)
        if file_identity(os.fstat(zf.fp.fileno())) != identity:
            zf.close()
            raise OSError(f"{path} changed while it was being audited")
        if len(_OPEN_ZIPS) >= 8:  # keep a few: file handles are finite
            _OPEN_ZIPS.pop(next(iter(_OPEN_ZIPS))).close()
        _OPEN_ZIPS[key] = zf
    return zf


class ZipArtifact(Artifact):
    """Shared reading of zip archives (wheels, and sdists shipped as .zip)."""

    #: the single top-level folder stripped from member names (sdists)
    strip_prefix = ""
    single_file = True

    def __init__(self, ref: ArtifactRef) -> None:
        super().__init__(ref)
        self._h_zip: zipfile.ZipFile | None = None
        self._entries: dict[str, ZipEntry] = {}  # member path -> its central directory entry
        self._identity = ""  # file_identity of the archive when it was listed

    def _zip(self) -> zipfile.ZipFile:
        if self._h_zip is None or self._h_zip.fp is None:  # None, or closed when evicted from _OPEN_ZIPS
            if not self._identity:
                self._identity = file_identity(os.stat(self.ref.path))
            self._h_zip = _open_zip(self.ref.path, self._identity)
        return self._h_zip

    def list_members(self) -> list[Member]:
        path = self.ref.path
        try:
            with open(path, "rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            self.problem("CU001", f"cannot read {path}: {exc.strerror or exc}")
            return []
        if magic[:2] != b"PK":
            self.problem("CU006", f"{os.path.basename(path)} is not a zip archive (starts with {magic!r})", magic=magic.hex())
            return []
        entries = _declared_entries(path)
        if entries > MAX_ENTRIES:
            # parsing the central directory alone would hold every entry in memory
            self.problem("CU004", f"{os.path.basename(path)} declares {entries} entries; it is not read",
                         declared_entries=entries)
            return []
        try:
            # the archive's identity, taken before it is opened: facts of its
            # members are cached under it, never under what the archive claims
            self._identity = file_identity(os.stat(path))
            zf = self._zip()
            infos = zf.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, struct.error) as exc:
            # NotImplementedError: zipfile's answer to a "version needed to extract" it does not know
            self.problem("CU002", f"{os.path.basename(path)}: corrupt or truncated zip ({exc})")
            return []
        return self._members_from(infos, os.path.getsize(path))

    def _members_from(self, infos: list[zipfile.ZipInfo], archive_size: int) -> list[Member]:
        members: list[Member] = []
        seen: set[str] = set()
        # Entries whose data overlap are the trick of non-recursive zip bombs.
        # Each entry's span starts at its local header and covers at least the
        # header, the name and the compressed data (a lower bound: no extra
        # field, no data descriptor, so honest archives never trip it).  An
        # entry whose header lies inside an earlier span overlaps it, and both
        # are flagged: in Fifield's overlapping bomb the first entry, whose data
        # covers all the others, is the one that inflates the most.
        spans = sorted((i.header_offset, i.header_offset + 30 + len(i.orig_filename)
                        + i.compress_size, i.filename) for i in infos if not i.filename.endswith("/"))
        overlapping: set[str] = set()
        reach, owner = -1, ""
        for start, end, name in spans:
            if start < reach:
                overlapping.update((name, owner))
            if end > reach:
                reach, owner = end, name
        for info in infos:
            name = info.filename
            if info.filename.endswith("/"):
                continue
            why = unsafe_member_name(name)
            if why:
                self.problem("CU003", f"member {name!r} {why}; it is ignored", member=name, reason=why)
                continue
            if is_symlink_mode(info.external_attr >> 16):
                self.problem("CU003", f"member {name!r} is a symbolic link; it is ignored", member=name, reason="symlink")
                continue
            if name in overlapping:
                self.problem("CU004", f"member {name!r} overlaps another entry (zip bomb); it is not read", member=name)
                continue
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > MAX_MEMBER_SIZE or (info.file_size > MIN_RATIO_SIZE and ratio > MAX_RATIO):
                self.problem(
                    "CU004",
                    f"member {name!r} declares {info.file_size} bytes from {info.compress_size} compressed "
                    f"(ratio {ratio:.0f}); it is not read",
                    member=name,
                    declared_size=info.file_size,
                    compressed_size=info.compress_size,
                )
                continue
            if info.flag_bits & 0x1:
                self.problem("CU002", f"member {name!r} is encrypted; it is not read", member=name, reason="encrypted")
                continue
            if info.compress_type not in _READABLE_METHODS:
                self.problem("CU002", f"member {name!r} uses compression method {info.compress_type}, which "
                             "installers cannot read; it is not read", member=name, reason="compression method")
                continue
            if info.header_offset + info.compress_size > archive_size:
                self.problem("CU002", f"member {name!r} extends past the end of the archive (truncated)", member=name)
                continue
            path = name
            if self.strip_prefix:
                if not name.startswith(self.strip_prefix):
                    continue
                path = name[len(self.strip_prefix) :]
            if path in seen:
                self.problem("CU003", f"member {name!r} appears twice in the archive", member=path, reason="duplicate")
                continue
            seen.add(path)
            self._entries[path] = ZipEntry(name, info.header_offset, info.compress_size, info.file_size,
                                           info.compress_type, info.CRC)
            # What the archive says about a member (CRC-32, sizes) is chosen by
            # whoever made it, and CRC-32 can be forged: alone it would let a
            # crafted wheel inherit the facts of a clean one.  So the key starts
            # with the archive file's own identity (device, inode, size, mtime,
            # ctime: a different or rewritten file never matches), then the
            # member's whole path (extractors may record where a file is; two
            # empty `__init__.py` share CRC and sizes), CRC, sizes and offset.
            key = (f"zip:{self._identity}:{info.header_offset}:{key_text(path)}:{info.CRC:08x}:"
                   f"{info.file_size}:{info.compress_size}")
            members.append(Member(path, classify(path), info.file_size, key))
        return members

    def open_member(self, path: str) -> IO[bytes]:
        if not self._entries:
            self.members  # noqa: B018 - lists the archive, filling the entry map
        entry = self._entries.get(path)
        if entry is None:
            raise KeyError(f"{path}: no such member")
        return MemberStream(self.ref.path, self._identity, entry)


class WheelArtifact(ZipArtifact):
    def __init__(self, path: str) -> None:
        name, version = parse_wheel_name(path)
        super().__init__(ArtifactRef(ArtifactKind.WHEEL, os.path.abspath(path), name, version))
        if not name:
            self.problem("CU006", f"{os.path.basename(path)} is not a valid wheel file name (PEP 427)")

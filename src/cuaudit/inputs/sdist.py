"""Source distributions (.tar.gz / .tar.bz2 / .tar.xz / .zip), read in place.

They are never built: building an sdist runs its code.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import tarfile
import zipfile
import zlib
from typing import IO

from cuaudit.inputs.artifact import Artifact, classify, file_identity, key_text, unsafe_member_name
from cuaudit.inputs.budgets import budget
from cuaudit.inputs.wheel import MAX_ENTRIES, MAX_MEMBER_SIZE, MAX_RATIO, MIN_RATIO_SIZE, ZipArtifact
from cuaudit.model import ArtifactKind, ArtifactRef, Member

_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")
#: Members of a tar sdist are kept in memory after one sequential pass (a
#: compressed tar cannot seek back cheaply); only those we may analyse, and
#: only up to this size each.
MAX_TAR_MEMBER = budget("TAR_MEMBER")


#: ... and no more than this in all: the rest is listed as skipped (CU004).
MAX_TAR_HELD = budget("TAR_HELD")
#: A GNU long name / long link or a pax header larger than this ends the
#: listing (CU004): tarfile reads one whole into memory before the member.
MAX_TAR_HEADER = budget("TAR_HEADER")
#: ... and so does a chain of more extension headers than this before one
#: member (tarfile follows the chain recursively).
MAX_TAR_HEADER_CHAIN = budget("TAR_HEADER_CHAIN")


class _TarBudget(tarfile.TarError):
    """An extension header past the budgets (not a HeaderError: tarfile must not swallow it)."""


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile's member header, refusing extension headers past the budgets before reading them."""

    def _bounded(self, tf: tarfile.TarFile, proc):
        if self.size > MAX_TAR_HEADER:
            raise _TarBudget(f"an extension header of {self.size} bytes (more than {MAX_TAR_HEADER})")
        depth = getattr(tf, "_cuaudit_chain", 0) + 1
        if depth > MAX_TAR_HEADER_CHAIN:
            raise _TarBudget(f"more than {MAX_TAR_HEADER_CHAIN} extension headers in a row")
        tf._cuaudit_chain = depth
        try:
            return proc(tf)
        finally:
            tf._cuaudit_chain = depth - 1

    def _proc_gnulong(self, tf):
        return self._bounded(tf, super()._proc_gnulong)

    def _proc_pax(self, tf):
        return self._bounded(tf, super()._proc_pax)


#: Members of tar sdists read by this process, by (path, size, mtime).  Forked
#: workers inherit it (memory, not file offsets: safe), so the chunks of a big
#: sdist are not decompressed again in every worker.
_TAR_DATA: dict[tuple[str, str], dict[str, bytes]] = {}


def is_sdist_name(path: str) -> bool:
    return path.endswith(_TAR_SUFFIXES) or path.endswith(".zip")


def _sdist_ref(path: str) -> ArtifactRef:
    base = os.path.basename(path)
    for suffix in _TAR_SUFFIXES + (".zip",):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    name, _, version = base.rpartition("-")
    return ArtifactRef(ArtifactKind.SDIST, os.path.abspath(path), name, version if name else "")


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:24]


def _common_prefix(names: list[str]) -> str:
    tops = {n.split("/", 1)[0] for n in names if n}
    if len(tops) == 1 and all("/" in n for n in names if n and not n.endswith("/")):
        return tops.pop() + "/"
    return ""


def _strip(name: str, prefix: str) -> str:
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def SdistArtifact(path: str) -> Artifact:  # noqa: N802 - a factory that reads like a class
    return ZipSdist(path) if path.endswith(".zip") else TarSdist(path)


class ZipSdist(ZipArtifact):
    def __init__(self, path: str) -> None:
        super().__init__(_sdist_ref(path))

    def _members_from(self, infos: list[zipfile.ZipInfo], archive_size: int) -> list[Member]:
        self.strip_prefix = _common_prefix([i.filename for i in infos if not unsafe_member_name(i.filename)])
        return super()._members_from(infos, archive_size)


class TarSdist(Artifact):
    single_file = True

    def __init__(self, path: str) -> None:
        super().__init__(_sdist_ref(path))
        self._h_data: dict[str, bytes] | None = None

    def list_members(self) -> list[Member]:
        path = self.ref.path
        try:
            digest = _digest(path)
        except OSError as exc:
            self.problem("CU001", f"cannot read {path}: {exc.strerror or exc}")
            return []
        try:
            data = self._read_all()
        except _TarBudget as exc:  # in the first member's headers (later ones end the listing there)
            self.problem("CU004", f"{os.path.basename(path)}: {exc}; it is not read", reason="tar header")
            return []
        except (tarfile.TarError, EOFError, zipfile.BadZipFile, ValueError, zlib.error, lzma.LZMAError, OSError) as exc:
            # gzip/bzip2/xz raise OSError subclasses (BadGzipFile) on bad data: the
            # file was readable (we hashed it), so any error here is about its content.
            try:
                with open(path, "rb") as fh:
                    head = fh.read(512)
            except OSError:
                head = b""
            # A compressed stream or a ustar header: a tar that is cut or corrupt
            # (CU002).  Anything else is not a tar at all, whatever its name (CU006).
            is_tar = head[:2] in (b"\x1f\x8b", b"BZ") or head[:4] == b"\xfd7zX" or head[257:262] == b"ustar"
            self.problem("CU002" if is_tar else "CU006",
                         f"{os.path.basename(path)}: {'corrupt or truncated' if is_tar else 'not a'} tar archive ({exc})")
            return []
        return [Member(p, classify(p), len(b), f"sdist:{digest}:{key_text(p)}") for p, b in sorted(data.items())]

    def _read_all(self) -> dict[str, bytes]:
        """One sequential pass (a compressed tar cannot seek back cheaply)."""
        if self._h_data is not None:
            return self._h_data
        key = (self.ref.path, file_identity(os.stat(self.ref.path)))
        if key in _TAR_DATA:  # read by this process already, or by the parent it was forked from
            self._h_data = _TAR_DATA[key]
            return self._h_data
        by_name: dict[str, bytes] = {}
        big: list[str] = []
        compressed = max(os.path.getsize(self.ref.path), 1)
        declared = 0
        held = 0
        with tarfile.open(self.ref.path, "r:*", tarinfo=_BoundedTarInfo) as tf:
            for count, info in enumerate(_members_within_budget(tf, self)):
                if count >= MAX_ENTRIES:
                    self.problem("CU004", f"{os.path.basename(self.ref.path)} has more than {MAX_ENTRIES} members; "
                                 "the rest is not read", declared_entries=count)
                    break
                if info.isdir():
                    continue
                why = unsafe_member_name(info.name)
                if why:
                    self.problem("CU003", f"member {info.name!r} {why}; it is ignored", member=info.name, reason=why)
                    continue
                if info.issym() or info.islnk():
                    kind = "symbolic" if info.issym() else "hard"
                    self.problem("CU003", f"member {info.name!r} is a {kind} link to {info.linkname!r}; it is not followed",
                                 member=info.name, reason=f"{kind} link")
                    continue
                if not info.isfile():
                    self.problem("CU003", f"member {info.name!r} is a device or special file; it is ignored",
                                 member=info.name, reason="special file")
                    continue
                if info.name in by_name or info.name in big:
                    self.problem("CU003", f"member {info.name!r} appears twice in the archive", member=info.name,
                                 reason="duplicate")
                    continue
                # Walking past a member inflates it even unread: bound the whole archive too.
                declared += info.size
                if declared > MAX_MEMBER_SIZE or (declared > MIN_RATIO_SIZE and declared / compressed > MAX_RATIO):
                    self.problem("CU004", f"{os.path.basename(self.ref.path)}: members declare {declared} bytes from "
                                 f"{compressed} compressed; the rest of the archive is not read",
                                 member=info.name, declared_size=declared, compressed_size=compressed)
                    break
                if info.size > MAX_TAR_MEMBER or held + info.size > MAX_TAR_HELD:
                    big.append(info.name)
                    continue
                held += info.size
                fh = tf.extractfile(info)
                by_name[info.name] = fh.read(info.size) if fh else b""
        prefix = _common_prefix(list(by_name) + big)
        for name in big:
            self.skip(_strip(name, prefix), f"larger than {MAX_TAR_MEMBER} bytes, or past {MAX_TAR_HELD} bytes "
                      "of members read; not read from the sdist")
        self._h_data = {_strip(name, prefix): blob for name, blob in by_name.items()}
        if len(_TAR_DATA) >= 4:
            _TAR_DATA.pop(next(iter(_TAR_DATA)))
        _TAR_DATA[key] = self._h_data
        return self._h_data

    def open_member(self, path: str) -> IO[bytes]:
        return io.BytesIO(self._read_all()[path])


def _members_within_budget(tf: tarfile.TarFile, art: Artifact):
    """The members of ``tf`` up to the first extension header past the budgets (a CU004 finding)."""
    while True:
        try:
            info = tf.next()
        except _TarBudget as exc:
            art.problem("CU004", f"{os.path.basename(art.ref.path)}: {exc}; the rest of the archive is not read",
                        reason="tar header")
            return
        if info is None:
            return
        yield info

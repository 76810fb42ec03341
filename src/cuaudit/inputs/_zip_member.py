"""One zip member, inflated with bounds whatever its compression method.

zipfile inflates bzip2 and lzma members in one call per read, with no limit on
the output: ``read()`` of a 12 KB bzip2 member asks for everything it expands
to at once (gigabytes, minutes), and a member whose sizes lie does the same
with deflate.  Here every decoder call has a maximum output, no more bytes
than the central directory declares are ever produced, the CRC-32 is checked
once they are, and any decoder error is a :class:`zipfile.BadZipFile` (a
CU002 finding for the member).  The member is read from a file descriptor of
its own, checked to be the archive that was listed.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import struct
import zipfile
import zlib
from typing import NamedTuple

from cuaudit.inputs.identity import file_identity

#: compressed bytes read per step, and the most output one decoder call may produce
_CHUNK = 1 << 16
_MAX_OUT = 1 << 20

try:
    # ISA-L has zlib's interface (bounded output, unconsumed_tail, crc32) and inflates about
    # twice as fast: the eight largest members of cupy 14.2.0, streamed as here with their
    # CRC, 520 MB/s against zlib's 260 and zlib-ng's 410 (libdeflate inflates whole buffers only).
    from isal import isal_zlib as inflater
except ImportError:  # pragma: no cover - a platform without isal's wheels
    inflater = zlib  # type: ignore[assignment]

_INFLATER_ERRORS = (zlib.error, inflater.error)


class ZipEntry(NamedTuple):
    """What the central directory says about one member (picklable, unlike an open archive)."""

    name: str
    header_offset: int
    compress_size: int
    file_size: int
    method: int
    crc: int


class MemberStream(io.RawIOBase):
    """A read-only stream of one member's bytes; seeking back starts inflating again."""

    def __init__(self, archive: str, identity: str, entry: ZipEntry) -> None:
        super().__init__()
        self._archive, self._entry = archive, entry
        self._fh = open(archive, "rb")
        try:
            if file_identity(os.fstat(self._fh.fileno())) != identity:
                raise OSError(f"{archive} changed while it was being audited")
            self._start()
        except BaseException:
            self._fh.close()
            raise

    def _start(self) -> None:
        e = self._entry
        self._fh.seek(e.header_offset)
        head = self._fh.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"{e.name}: bad local file header")
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        self._fh.seek(e.header_offset + 30 + name_len + extra_len)
        self._raw_left = e.compress_size
        self._left = e.file_size
        self._pos = 0
        self._crc = 0
        self._tail = b""  # compressed bytes the decoder has not consumed yet (deflate)
        if e.method == zipfile.ZIP_STORED:
            self._dec = None
        elif e.method == zipfile.ZIP_DEFLATED:
            self._dec = inflater.decompressobj(-15)
        elif e.method == zipfile.ZIP_BZIP2:
            self._dec = bz2.BZ2Decompressor()
        elif e.method == zipfile.ZIP_LZMA:
            # zip's LZMA: version (2 bytes), size of the properties (2), properties, raw LZMA1 data
            head = self._raw(4)
            if len(head) != 4:
                raise zipfile.BadZipFile(f"{e.name}: truncated LZMA header")
            props = self._raw(struct.unpack("<H", head[2:4])[0])
            if len(props) == 5:
                # The decoder allocates the whole dictionary the header asks for (up to 4 GB)
                # before any output; a dictionary larger than the member is never used.
                wanted = struct.unpack("<I", props[1:5])[0]
                props = props[:1] + struct.pack("<I", min(wanted, max(e.file_size, 4096)))
            try:
                filt = lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)  # noqa: SLF001 - as zipfile does
                self._dec = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[filt])
            except (lzma.LZMAError, ValueError, TypeError) as exc:
                raise zipfile.BadZipFile(f"{e.name}: corrupt LZMA header ({exc})") from None
        else:
            raise zipfile.BadZipFile(f"{e.name}: compression method {e.method} is not read")

    def _raw(self, n: int) -> bytes:
        data = self._fh.read(min(n, self._raw_left))
        self._raw_left -= len(data)
        return data

    def _inflate(self, limit: int) -> bytes:
        """Up to ``limit`` more bytes of the member (b"" once the compressed data is used up)."""
        dec = self._dec
        if dec is None:
            return self._raw(limit)
        try:
            while True:
                if not hasattr(dec, "needs_input"):  # deflate (zlib's interface), not bzip2/lzma
                    data = dec.unconsumed_tail
                    if not data:
                        # ISA-L takes all the input it is given and holds what it could not yet
                        # output (zlib leaves it in unconsumed_tail): drain that before feeding more
                        out = dec.decompress(b"", limit)
                        if out:
                            return out
                        data = self._raw(_CHUNK)
                        if not data:
                            return dec.flush()[:limit]
                    out = dec.decompress(data, limit)
                else:
                    if dec.eof:
                        return b""
                    data = self._raw(_CHUNK) if dec.needs_input else b""
                    if not data and dec.needs_input:
                        return b""
                    out = dec.decompress(data, limit)
                if out:
                    return out
        except (*_INFLATER_ERRORS, lzma.LZMAError, OSError, EOFError, ValueError) as exc:
            raise zipfile.BadZipFile(f"{self._entry.name}: corrupt compressed data ({exc})") from None

    def read(self, n: int | None = -1) -> bytes:
        want = self._left if n is None or n < 0 else min(n, self._left)
        parts, got = [], 0
        while got < want:
            chunk = self._inflate(min(want - got, _MAX_OUT))
            if not chunk:
                raise zipfile.BadZipFile(f"{self._entry.name}: truncated member ({self._left - got} bytes missing)")
            parts.append(chunk)
            got += len(chunk)
            self._crc = inflater.crc32(chunk, self._crc)
        self._left -= got
        self._pos += got
        if self._left == 0 and want and self._crc != self._entry.crc:
            raise zipfile.BadZipFile(f"Bad CRC-32 for member {self._entry.name!r}")
        return b"".join(parts)

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = {io.SEEK_SET: offset, io.SEEK_CUR: self._pos + offset,
                  io.SEEK_END: self._entry.file_size + offset}[whence]
        if target < self._pos:
            self._start()  # inflate again from the start
        while self._pos < min(target, self._entry.file_size):
            self.read(min(target - self._pos, _MAX_OUT))
        return self._pos

    def close(self) -> None:
        if not self.closed:
            self._fh.close()
        super().close()

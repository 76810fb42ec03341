"""Write the starting inputs of every harness into DIR/<harness>/ (built here, byte by byte or with cc).

    python fuzz/make_seeds.py DIR
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

# the hand-written fat binary and ELF of the device-code tests (tests/devicecode_bytes.py: no pytest needed)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from devicecode_bytes import container, elf_with, entry  # noqa: E402

C_SOURCE = r"""
#include <math.h>
#include <stdio.h>
static void *__pyx_capi__[2];
const char *names[] = {"__pyx_capi__", "pkgprov.prov", "int (int)", "__pyx_vtable__"};
int PyInit_prov(void) { return (int)(sqrt(2.0) + printf("%s", names[0])); }
double api_func(double x) { return cos(x) + (double)(long)__pyx_capi__[0]; }
"""


def elf_seeds() -> list[bytes]:
    cc = shutil.which("cc") or shutil.which("gcc")
    out = []
    if cc:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "m.c")
            with open(src, "w") as fh:
                fh.write(C_SOURCE)
            for flags in (["-O0"], ["-O2", "-s"], ["-O1", "-Wl,--hash-style=gnu", "-Wl,-z,relro"]):
                so = os.path.join(d, "m.so")
                subprocess.run([cc, "-shared", "-fPIC", "-o", so, src, "-lm", *flags], check=True, capture_output=True)
                with open(so, "rb") as fh:
                    out.append(fh.read())
    return out + [fatbin_elf(), b"\x7fELF\x02\x01\x01" + b"\0" * 57]


def fatbin_container() -> bytes:
    return container(entry(2, 80, payload=b"\0" * 32), entry(1, 90, payload=b".version 8.0\n.target sm_90\n\0\0\0\0"))


def fatbin_elf() -> bytes:
    """A minimal 64-bit ELF with one .nv_fatbin section."""
    return elf_with({".nv_fatbin": fatbin_container()})


WHEEL_FILES = {
    "demo/__init__.py": b"import os\n",
    "demo/_ext.cpython-311-x86_64-linux-gnu.so": b"\x7fELF\x02\x01\x01" + b"\0" * 57,
    "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/RECORD": b"demo/__init__.py,,\n",
}


def zip_seeds() -> list[bytes]:
    out = []
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as zf:
            for name, data in WHEEL_FILES.items():
                zf.writestr(name, data)
        out.append(buf.getvalue())
    return out


def tar_seeds() -> list[bytes]:
    out = []
    for mode, fmt in (("w:gz", tarfile.GNU_FORMAT), ("w:bz2", tarfile.PAX_FORMAT), ("w:xz", tarfile.USTAR_FORMAT),
                      ("w", tarfile.GNU_FORMAT)):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode=mode, format=fmt) as tf:
            for name, data in {**WHEEL_FILES, "demo-1.0/" + "x" * (120 if fmt != tarfile.USTAR_FORMAT else 60) + ".py": b"pass\n"}.items():
                info = tarfile.TarInfo("demo-1.0/" + name if not name.startswith("demo-1.0/") else name)
                info.size = len(data)
                if fmt == tarfile.PAX_FORMAT:
                    info.pax_headers = {"comment": "seed"}
                tf.addfile(info, io.BytesIO(data))
            link = tarfile.TarInfo("demo-1.0/link")
            link.type, link.linkname = tarfile.SYMTYPE, "../../etc/passwd"
            tf.addfile(link)
        out.append(buf.getvalue())
    return out


def text_seeds() -> list[bytes]:
    texts = [
        b'[project]\nname = "demo"\nversion = "1.0"\ndependencies = ["numpy>=2", "cupy-cuda12x"]\n'
        b'[build-system]\nrequires = ["setuptools", "Cython>=3"]\n[tool.cuaudit]\nselect = ["CU0"]\n',
        b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: numpy>=2\n\nlong text\n",
        b"Metadata-Version: 1.0\nName: demo\nVersion: 1.0\n",
        b"[metadata]\nname = demo\n[options]\ninstall_requires = numpy\n",
        b"demo/__init__.py,sha256=abc,10\n\"a,b\",,\ndemo-1.0.dist-info/RECORD,,\n",
        b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
        b"demo\n_demo_ext\n",
        b"../src\nimport os\n# comment\n",
        b"MAPPING = {'demo': '/src/demo'}\nNAMESPACES = {}\n",
    ]
    return [bytes([i]) + t for i, t in enumerate(texts)]


def main(root: str) -> None:
    elf = elf_seeds()
    sets = {
        "elf": elf, "fatbin": elf + [fatbin_container()], "cython": elf,
        "zip": zip_seeds(), "tar": tar_seeds(), "text": text_seeds(), "report": [b"\0" * 64, os.urandom(256)],
    }
    for harness, seeds in sets.items():
        d = os.path.join(root, harness)
        os.makedirs(d, exist_ok=True)
        for i, data in enumerate(seeds):
            with open(os.path.join(d, f"seed-{i}"), "wb") as fh:
                fh.write(data)


if __name__ == "__main__":
    main(sys.argv[1])

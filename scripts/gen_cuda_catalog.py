#!/usr/bin/env python3
"""Generate ``src/cuaudit/data/cuda_catalog.json.gz``: which libraries are CUDA libraries, and what they export.

Two sources, both public and pinned:

* cuda-pathfinder's descriptor catalog (``pip install cuda-pathfinder==1.9.0``,
  the ``catalog`` extra): every CUDA library by name, whether it comes with the
  toolkit, with other NVIDIA products or with the **driver**, its sonames, and
  the ``site-packages`` folders of its ``nvidia-*`` wheels;
* auditwheel's manylinux policy (``pip install auditwheel==6.8.2``, the ``bench``
  extra): the libraries every manylinux system provides (its ``lib_whitelist``), for
  which an unused ``DT_NEEDED`` is reported as info only;
* the ``nvidia-*`` wheels given on the command line (default: the corpus's),
  whose libraries' exported dynamic symbols are recorded per soname, so that a
  wheel checked on its own can still be told which of its ``DT_NEEDED`` CUDA
  libraries it really uses.  Only names are kept (sorted, one string per
  library), gzip-compressed.

Run: ``python scripts/gen_cuda_catalog.py [WHEEL...]`` from the repository root
(uses cuaudit's own ELF reader, streaming each wheel member once).
"""

from __future__ import annotations

import glob
import importlib.metadata
import gzip
import json
import os
import re
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from cuaudit.facts.elf import read_elf_stream  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "src", "cuaudit", "data", "cuda_catalog.json.gz")
CORPUS = os.environ.get("CUAUDIT_CORPUS") or os.path.expanduser("~/.cache/cuaudit/corpus")

#: Driver components that cuda-pathfinder 1.9.0 does not list (it lists libcuda, libnvidia-ml,
#: libnvcudla).  They come with the NVIDIA driver package, never with the toolkit or a wheel.
EXTRA_DRIVER_LIBS = {
    "nvidia-ptxjitcompiler": ("libnvidia-ptxjitcompiler.so.1",),
    "nvidia-nvvm": ("libnvidia-nvvm.so.4",),
    "cudadebugger": ("libcudadebugger.so.1",),
    "nvidia-opencl": ("libnvidia-opencl.so.1",),
    "nvidia-gpucomp": ("libnvidia-gpucomp.so",),
}


def _stem(soname: str) -> str:
    return soname.split(".so", 1)[0]


def descriptors() -> list[dict]:
    from cuda.pathfinder._dynamic_libs.descriptor_catalog import DESCRIPTOR_CATALOG
    import cuda.pathfinder

    out = []
    for d in DESCRIPTOR_CATALOG:
        out.append({
            "name": d.name,
            "packaged_with": d.packaged_with,
            "stems": sorted({_stem(s) for s in d.linux_sonames}),
            "sonames": list(d.linux_sonames),
            "site_packages": list(d.site_packages_linux),
            "dependencies": list(d.dependencies),
        })
    for name, sonames in EXTRA_DRIVER_LIBS.items():
        out.append({"name": name, "packaged_with": "driver", "stems": sorted({_stem(s) for s in sonames}),
                    "sonames": list(sonames), "site_packages": [], "dependencies": []})
    return out, cuda.pathfinder.__version__


def manylinux_system_libraries() -> tuple[list[str], str]:
    """Libraries every manylinux system provides (auditwheel's policy ``lib_whitelist``), plus the loader."""
    import auditwheel.policy

    path = os.path.join(os.path.dirname(auditwheel.policy.__file__), "manylinux-policy.json")
    with open(path) as fh:
        policies = json.load(fh)
    names = {n for p in policies for n in p.get("lib_whitelist", ())}
    names |= {"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}  # the dynamic loader itself
    return sorted(names), importlib.metadata.version("auditwheel")


def exports(wheels: list[str]) -> dict[str, dict]:
    libs: dict[str, dict] = {}
    for whl in wheels:
        dist = os.path.basename(whl).split("-")[0]
        version = os.path.basename(whl).split("-")[1]
        with zipfile.ZipFile(whl) as zf:
            for info in zf.infolist():
                base = info.filename.rsplit("/", 1)[-1]
                if not re.match(r"lib.*\.so(\.\d+)*$", base):
                    continue
                facts = read_elf_stream(lambda: zf.open(info), info.file_size, info.filename)
                soname = facts.soname or base
                names = sorted(set(facts.exports))
                libs[soname] = {
                    "dist": dist.replace("_", "-"),
                    "version": version,
                    "member": info.filename,
                    "versions": sorted(set(facts.version_defs)),
                    "exports": "\n".join(names),
                }
                print(f"{soname}: {len(names)} exports from {os.path.basename(whl)}", file=sys.stderr)
    return libs


def main(argv: list[str]) -> int:
    wheels = argv or sorted(glob.glob(os.path.join(CORPUS, "nvidia_*.whl")))
    wheels = [w for w in wheels if "cuobjdump" not in w]  # a tool, no libraries
    desc, pf_version = descriptors()
    system, aw_version = manylinux_system_libraries()
    data = {
        "auditwheel": aw_version,
        "system_libraries": system,
        "generated_by": "scripts/gen_cuda_catalog.py",
        "cuda_pathfinder": pf_version,
        "wheels": [os.path.basename(w) for w in wheels],
        "libraries": desc,
        "exports": exports(wheels),
    }
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    with gzip.GzipFile(OUT, "wb", mtime=0) as fh:
        fh.write(raw)
    print(f"wrote {OUT}: {os.path.getsize(OUT)} bytes ({len(raw)} uncompressed)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

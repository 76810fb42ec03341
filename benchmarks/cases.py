"""The benchmark cases, as data.  Adding a case is adding one :class:`Case`.

Each case names its inputs (corpus files, members extracted once, built
environments), the cuaudit command, the peers (what users run today for the
same question) and the physical floor (``floors.py``).  Argument templates
are filled with the resolved inputs, ``{py}`` (this interpreter), ``{bench}``
(this folder), ``{fresh}`` (an empty folder per run) and ``{casework}`` (a
folder kept for the whole case, e.g. a fact cache filled by ``prepare``).

Cases for features that are still being written report
"n/a (feature not present)" until their module lands; nothing else changes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Callable

from harness import (FETCH_SCRIPT, Case, Cmd, CopiedVenv, Corpus, CorpusFiles, ElfMembers, Environment, FreshVenv, Input, Interpreter,
                     Member, PopularVenv, Script, Target, Unpacked)

# -- what this machine and this cuaudit have -----------------------------------------


def has_module(name: str, what: str = "") -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"{what or name} not present"

    return check


def has_tool(name: str) -> Callable[[], str | None]:
    return lambda: None if shutil.which(name) else f"{name} not installed"


def has_rules(prefix: str, what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        from cuaudit.rules import all_rules

        if any(r.code.startswith(prefix) for r in all_rules()):
            return None
        return f"feature not present (no {prefix}xx rules: {what})"

    return check


def check_has_option(option: str) -> bool:
    """Whether this cuaudit's ``check`` takes ``option`` (features land on other branches)."""
    try:
        from cuaudit.cli import build_parser

        sub = next(a for a in build_parser()._subparsers._group_actions)  # type: ignore[union-attr]
        return option in sub.choices["check"]._option_string_actions
    except Exception:  # noqa: BLE001 - an older or newer CLI layout: assume not
        return False


# -- command builders -------------------------------------------------------------------

def console_script(name: str, module: str) -> tuple[str, ...]:
    """The command users type (the console script beside this interpreter)."""
    script = Path(sys.executable).parent / name
    return (str(script),) if script.exists() else ("{py}", "-m", module)


CUAUDIT = console_script("cuaudit", "cuaudit.cli")
AUDITWHEEL_CMD = console_script("auditwheel", "auditwheel")


#: a cold audit that ignores any project configuration, without colours or progress
CHECK_FLAGS = ("--no-cache", "--isolated", "--color", "never", "-q")


def check(*extra: str, label: str = "cuaudit check", requires=None) -> Cmd:
    return Cmd(label, (*CUAUDIT, "check", *CHECK_FLAGS, *extra, "{wheel}"), ok=(0, 1), requires=requires)


AUDITWHEEL = Cmd("auditwheel show", (*AUDITWHEEL_CMD, "show", "{wheel}"), ok=(0, 1),
                 requires=has_module("auditwheel", "auditwheel (pip install -e '.[bench]')"))


def inflate_floor(kinds: str = "elf,python,metadata", *wheels: str) -> Cmd:
    return Cmd(f"inflate {kinds.replace(',', '+')} (zlib)",
               ("{py}", "{bench}/floors.py", "inflate", *(wheels or ("{wheel}",)), "--kinds", kinds), summary=True)


#: cuaudit's own ELF reader on one file (the module lands with the linkage work).
DYNSYM_CUAUDIT = r"""
import json, sys, time
try:
    from cuaudit.facts.elf import read_elf_file
except ImportError as exc:
    print(json.dumps({"na": f"feature not present (cuaudit.facts.elf: {exc})"}))
    raise SystemExit(0)
t = time.perf_counter()
facts = read_elf_file(sys.argv[1])
t = time.perf_counter() - t
print(json.dumps({"items": len(facts.imports) + len(facts.exports), "seconds": t}))
"""

#: the same reader streaming a member out of the wheel (no extraction, one pass)
DYNSYM_CUAUDIT_STREAM = r"""
import json, sys, time, zipfile
try:
    from cuaudit.facts.elf import read_elf_stream
except ImportError as exc:
    print(json.dumps({"na": f"feature not present (cuaudit.facts.elf: {exc})"}))
    raise SystemExit(0)
t = time.perf_counter()
zf = zipfile.ZipFile(sys.argv[1])
info = zf.getinfo(sys.argv[2])
facts = read_elf_stream(lambda: zf.open(info), info.file_size, sys.argv[2])
t = time.perf_counter() - t
print(json.dumps({"items": len(facts.imports) + len(facts.exports), "seconds": t}))
"""

#: what a user does with pyelftools for a wheel member: read it into memory
DYNSYM_PYELFTOOLS_STREAM = r"""
import io, json, sys, time, zipfile
from elftools.elf.elffile import ELFFile
n = 0
t = time.perf_counter()
data = zipfile.ZipFile(sys.argv[1]).read(sys.argv[2])
for sym in ELFFile(io.BytesIO(data)).get_section_by_name(".dynsym").iter_symbols():
    if sym.name and sym["st_info"]["type"] != "STT_SECTION":
        n += 1
        imported = sym["st_shndx"] == "SHN_UNDEF"
print(json.dumps({"items": n, "seconds": time.perf_counter() - t}))
"""

#: what a pyelftools script does for the same answer: every dynamic symbol's
#: name, and whether it is defined (export) or not (import).
DYNSYM_PYELFTOOLS = r"""
import json, sys, time
from elftools.elf.elffile import ELFFile
n = 0
t = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    for sym in ELFFile(fh).get_section_by_name(".dynsym").iter_symbols():
        if sym.name and sym["st_info"]["type"] != "STT_SECTION":
            n += 1
            imported = sym["st_shndx"] == "SHN_UNDEF"
print(json.dumps({"items": n, "seconds": time.perf_counter() - t}))
"""

#: the device-code reader, when ``cuaudit archs`` is not there yet
DEVICECODE_CUAUDIT = r"""
import json, sys
try:
    import cuaudit.facts.fatbin as mod
except ImportError as exc:
    print(json.dumps({"na": f"feature not present (cuaudit archs / cuaudit.facts.fatbin: {exc})"}))
    raise SystemExit(0)
from cuaudit.facts import Extractor, MemberReader
from cuaudit.inputs.file import FileArtifact
art = FileArtifact(sys.argv[1])
ex = next(c for c in vars(mod).values()
          if isinstance(c, type) and issubclass(c, Extractor) and c.__module__ == mod.__name__)()
fact = ex.extract(MemberReader(art, art.members[0]))
n = next((len(getattr(fact, a)) for a in ("entries", "images", "cubins", "elves") if hasattr(fact, a)), None)
print(json.dumps({"items": n} if isinstance(n, int) else {}))
"""


#: a line of cuobjdump's --list-elf --list-ptx listing (cuaudit archs -f cuobjdump prints the same)
LISTING_LINE = r"^(ELF|PTX) file +\d+: "
#: a named, non-section symbol line of readelf --dyn-syms -W
READELF_SYMBOL = r"^ *\d+: [0-9a-f]+ +(0x[0-9a-f]+|\d+) +(?!SECTION)[A-Z_]+ +[A-Z_]+ +[A-Z_]+ +\S+ +\S"


def devicecode_cmd() -> Cmd:
    if has_module("cuaudit.commands.archs")() is None:
        return Cmd("cuaudit archs", (*CUAUDIT, "archs", "--no-cache", "-f", "cuobjdump", "{lib}"), ok=(0, 1),
                   count=LISTING_LINE)
    return Cmd("cuaudit.facts.fatbin", ("{py}", "-c", DEVICECODE_CUAUDIT, "{lib}"), summary=True)


def dynsym_case(name: str, title: str, lib: Member, **kw) -> Case:
    return Case(
        name, title, {"lib": lib},
        cuaudit=Cmd("cuaudit.facts.elf", ("{py}", "-c", DYNSYM_CUAUDIT, "{lib}"), summary=True),
        peers=(
            Cmd("pyelftools", ("{py}", "-c", DYNSYM_PYELFTOOLS, "{lib}"), summary=True,
                requires=has_module("elftools", "pyelftools")),
            Cmd("readelf --dyn-syms -W", ("readelf", "--dyn-syms", "-W", "{lib}"), count=READELF_SYMBOL,
                requires=has_tool("readelf")),
        ),
        floor=Cmd("read .dynsym+.dynstr+versions", ("{py}", "{bench}/floors.py", "sections", "{lib}", ".dynsym",
                                                  ".dynstr", ".gnu.version", ".gnu.version_r", ".gnu.version_d"),
                  summary=True),
        unit="symbols", **kw,
    )


CUOBJDUMP = Member("nvidia_cuda_cuobjdump-13.4.92-*.whl", "nvidia/cu13/bin/cuobjdump", executable=True)


def devicecode_case(name: str, title: str, lib: Member, **kw) -> Case:
    return Case(
        name, title, {"lib": lib, "cuobjdump": CUOBJDUMP},
        cuaudit=devicecode_cmd(),
        peers=(Cmd("cuobjdump --list-elf --list-ptx", ("{cuobjdump}", "--list-elf", "--list-ptx", "{lib}"),
                   count=LISTING_LINE),),
        floor=Cmd("read .nv_fatbin", ("{py}", "{bench}/floors.py", "sections", "{lib}", ".nv_fatbin"), summary=True),
        unit="entries", **kw,
    )


def check_case(name: str, title: str, wheel: str, *, auditwheel: bool = True, **kw) -> Case:
    return Case(name, title, {"wheel": Corpus(wheel)}, cuaudit=check(), peers=(AUDITWHEEL,) if auditwheel else (),
                floor=inflate_floor(), **kw)


def overlink_case(name: str, title: str, wheel: str, libs: tuple[str, ...], **kw) -> Case:
    """Over-linking of one wheel's modules; ``libs`` are the wheels that
    provide the libraries they need (both tools read their export tables:
    cuaudit as evidence with ``--with`` where it has it, else audited too)."""
    return Case(
        name, title, {"wheel": Corpus(wheel), "libs": CorpusFiles(libs), "elf": ElfMembers((wheel,) + libs)},
        cuaudit=Cmd("cuaudit check --select CU2",
                    (*CUAUDIT, "check", *CHECK_FLAGS, "--select", "CU2", "{wheel}",
                     "--with={libs}" if check_has_option("--with") else "{libs}"),
                    ok=(0, 1), requires=has_rules("CU2", "over-linking")),
        # ldd needs the files on disk: the wheels are extracted once beforehand
        # and that unzip is not counted (in the peer's favour).
        peers=(Cmd("ldd -u -r (extracted)", ("sh", "-c", 'find "$1" -type f -name "*.so*" -print0 | xargs -0 ldd -u -r',
                                              "sh", "{elf}"),
                   env=(("LD_LIBRARY_PATH", "{elf.libdirs}"),), ok=(0, 1, 123), requires=has_tool("ldd")),),
        floor=inflate_floor("elf", "{wheel}", "{libs}"), **kw,
    )


def capi_case(name: str, title: str, wheel: str, **kw) -> Case:
    return Case(
        name, title, {"wheel": Corpus(wheel)},
        cuaudit=check("--select", "CU3", label="cuaudit check --select CU3",
                      requires=has_rules("CU3", "Cython C-API import recovery")),
        peers=(Cmd("objdump -d + text parsing", ("{py}", "{bench}/peers.py", "capi-objdump", "{wheel}"), summary=True,
                   requires=has_tool("objdump")),),
        floor=inflate_floor("elf"), unit="name/signature pairs", **kw,
    )


def env_cases(name: str, title: str, env: Environment, *, cold_targets=(), cached_targets=(), copied: bool = False,
              **kw) -> list[Case]:
    base = (*CUAUDIT, "env", "--python", "{env}", "--isolated", "--color", "never", "-q")
    cached = (*base, "--cache-dir", "{casework}/facts")
    # what pip offers to describe an environment (cuaudit does much more)
    pip = (Cmd("pip inspect", ("{py}", "-m", "pip", "--python", "{env}", "inspect")),
           Cmd("pip list", ("{py}", "-m", "pip", "--python", "{env}", "list", "--format", "json")))
    return [
        Case(f"{name}-cold", f"{title}, no fact cache", {"env": env},
             cuaudit=Cmd("cuaudit env (cold)", (*base, "--cache-dir", "{fresh}"), ok=(0, 1)), peers=pip,
             floor=Cmd("read ELF+py+metadata files", ("{py}", "{bench}/floors.py", "read-tree", "{env.site}"),
                       summary=True),
             targets=cold_targets, **kw),
        Case(f"{name}-cached", f"{title}, fact cache filled", {"env": env},
             cuaudit=Cmd("cuaudit env (cached)", cached, ok=(0, 1), prepare=cached), peers=pip,
             floor=Cmd("stat every file", ("{py}", "{bench}/floors.py", "stat-tree", "{env.site}"), summary=True),
             targets=cached_targets, **kw),
        # one installed file changed: the snapshot (src/cuaudit/snapshot.py) no longer holds, the facts do
        Case(f"{name}-facts-cached", f"{title}, fact cache filled, no snapshot", {"env": env},
             cuaudit=Cmd("cuaudit env (cached facts)",
                         ("{py}", "{bench}/without_snapshot.py", "{casework}/facts", *cached), ok=(0, 1),
                         prepare=cached), peers=pip,
             floor=Cmd("stat every file", ("{py}", "{bench}/floors.py", "stat-tree", "{env.site}"), summary=True),
             **kw),
        # a new virtual environment of the same packages (what CI makes for every run), with the cache
        # an audit of the first one left: every key of identity misses, the facts are found by content
        *([Case(f"{name}-copied", f"{title}, copied to a new venv, with the first one's fact cache",
                {"env": env, "copy": CopiedVenv(env)},
                cuaudit=Cmd("cuaudit env of the copy", ("{py}", "{bench}/with_cache_of.py", "{casework}/facts",
                                                        "{fresh}/facts", *CUAUDIT, "env", "--python", "{copy}",
                                                        "--isolated", "--color", "never", "-q",
                                                        "--cache-dir", "{fresh}/facts"),
                            ok=(0, 1), prepare=cached),
                peers=pip,
                floor=Cmd("read ELF+py+metadata files", ("{py}", "{bench}/floors.py", "read-tree", "{copy.site}"),
                          summary=True),
                **kw)] if copied else []),
    ]


#: NumPy-heavy programs for the NEP 50 tracer; each times its own compute
#: section and prints it as the JSON summary (the traced run's stdout is the
#: program's: the report goes to -o)
TRACE_WORKLOADS = {
    # array-array arithmetic on mid-size arrays: what numerical code mostly does
    "arrays-1e4": """
import json, numpy as np, time
rng = np.random.default_rng(0)
a = rng.random(10_000, dtype=np.float32); b = rng.random(10_000, dtype=np.float32)
t = time.perf_counter()
for i in range(3000):
    c = a * b + a - b
    d = np.sqrt(c * c + b * b) / (a + b)
    a, b = d, c
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
    # the worst case for per-operation overhead: tiny arrays, no scalars
    "arrays-10": """
import json, numpy as np, time
a = np.ones(10, np.float64); b = np.ones(10, np.float64)
t = time.perf_counter()
for i in range(100_000):
    c = a * b + a - b
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
    # scalar operands everywhere: every operation goes through the legacy model
    "scalars-1e4": """
import json, numpy as np, time
a = np.ones(10_000, np.float32)
t = time.perf_counter()
for i in range(3000):
    c = a * 2.0 + 1
    d = (c - 0.5) / 3
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
    # pure-Python arithmetic in the traced module (not NumPy)
    "python-ints": """
import json, time
t = time.perf_counter()
s = 0
for i in range(1_000_000):
    s = s + i * 2 - 1
print(json.dumps({"seconds": time.perf_counter() - t}))
""",
}


def trace_case(name: str, **kw) -> Case:
    """``cuaudit trace -- python script.py`` against ``python script.py``."""
    script = Script(name.replace("-", "_"), TRACE_WORKLOADS[name])
    return Case(
        f"trace-{name}", f"NEP 50 tracer overhead: {name}", {"script": script},
        cuaudit=Cmd("cuaudit trace -- python script",
                    (*CUAUDIT, "trace", "--no-cache", "--isolated", "-q", "-f", "json", "-o", os.devnull, "--exit-zero",
                     "--", "{py}", "{script}"),
                    summary=True, requires=has_module("cuaudit.commands.trace", "feature not present (cuaudit trace)")),
        peers=(Cmd("python script (untraced)", ("{py}", "{script}"), summary=True,
                   requires=has_module("numpy", "numpy (pip install -e '.[bench]')")),),
        **kw,
    )


def imports_cases(name: str, title: str, env: Input) -> list[Case]:
    """The static trap audit of an environment, cold and cached, against what
    people do today: import every package in a fresh interpreter (cuaudit's
    own opt-in ``--probe``)."""
    base = (*CUAUDIT, "env", "--python", "{env}", *CHECK_FLAGS[1:], "--select", "CU101,CU102")
    cached = (*base, "--cache-dir", "{casework}/facts")
    probe = Cmd("import every package (--probe)", (*base, "--probe", "--cache-dir", "{fresh}"), ok=(0, 1),
                requires=has_rules("CU1", "submodule traps"))
    floor = Cmd("read the .py files", ("{py}", "{bench}/floors.py", "read-tree", "{env.site}", "--kinds", "python"),
                summary=True)
    return [
        Case(f"{name}-cold", f"{title}: static, no fact cache, vs importing", {"env": env},
             cuaudit=Cmd("cuaudit env --select CU101,CU102 (cold)", (*base, "--cache-dir", "{fresh}"), ok=(0, 1),
                         requires=has_rules("CU1", "submodule traps")),
             peers=(probe,), floor=floor),
        Case(f"{name}-cached", f"{title}: static, fact cache filled, vs importing", {"env": env},
             cuaudit=Cmd("cuaudit env --select CU101,CU102 (cached)", cached, ok=(0, 1), prepare=cached,
                         requires=has_rules("CU1", "submodule traps")),
             peers=(probe,)),
    ]


# -- the inputs ---------------------------------------------------------------------

CUPY14 = "cupy_cuda12x-14.2.0-*.whl"
CUBLAS12 = "nvidia_cublas_cu12-12.9.1.4-*.whl"
TORCH = "torch-2.8.0-*.whl"
CU11_LIBS = (
    "nvidia_cublas_cu11-11.11.3.6-*.whl", "nvidia_cufft_cu11-10.9.0.58-*.whl", "nvidia_curand_cu11-10.3.0.86-*.whl",
    "nvidia_cusparse_cu11-11.7.5.86-*.whl", "nvidia_cuda_nvrtc_cu11-11.8.89-*.whl",
    "nvidia_cuda_runtime_cu11-11.8.89-*.whl",
)

SMALL_ENV = Environment(("fastrlock-0.8.3-*.whl", "rmm_cu12-24.12.0-*.whl", "nvidia_cuda_runtime_cu11-11.8.89-*.whl"))
#: a full CUDA Python environment: PyTorch, CuPy, CUDA Python, RAPIDS memory
#: manager and the NVIDIA library wheels of two CUDA major versions (~4.5 GB).
LARGE_ENV = Environment((
    TORCH, CUPY14, "numpy-2.0.2-*.whl", "fastrlock-0.8.3-*.whl", "cuda_bindings-13.0.3-*.whl",
    "rmm_cu12-24.12.0-*.whl", CUBLAS12, *CU11_LIBS,
))

# -- the cases ----------------------------------------------------------------------

#: issue 14: `check` with a cold cache is faster than `auditwheel show` on every wheel
FASTER = Target("speedup", 1, "auditwheel")

#: full `check` of wheels, smallest to largest; also the scaling series
CHECK_CASES: list[Case] = [
    check_case("check-fastrlock", "check fastrlock 0.8.3 (54 KB)", "fastrlock-0.8.3-*.whl", quick=True,
               targets=(FASTER,)),
    check_case("check-cudart-cu11", "check nvidia-cuda-runtime-cu11 11.8.89 (0.9 MB)",
               "nvidia_cuda_runtime_cu11-11.8.89-*.whl", quick=True, targets=(FASTER,)),
    check_case("check-rmm", "check rmm-cu12 24.12.0 (2 MB)", "rmm_cu12-24.12.0-*.whl", quick=True, targets=(FASTER,)),
    check_case("check-cuda-bindings", "check cuda-bindings 13.0.3 (12 MB)", "cuda_bindings-13.0.3-*.whl",
               targets=(FASTER,)),
    check_case("check-numpy", "check numpy 2.0.2 (19 MB)", "numpy-2.0.2-*.whl", targets=(FASTER,)),
    check_case("check-cupy-cuda11x-12.3", "check cupy-cuda11x 12.3.0 (90 MB)", "cupy_cuda11x-12.3.0-*.whl",
               targets=(FASTER,)),
    check_case("check-cupy-14.2", "check cupy-cuda12x 14.2.0 (137 MB)", CUPY14,
               targets=(Target("speedup", 3, "auditwheel"),)),
    check_case("check-cublas-cu12", "check nvidia-cublas-cu12 12.9.1.4 (581 MB)", CUBLAS12, targets=(FASTER,)),
    check_case("check-torch-2.8", "check torch 2.8.0 (888 MB, 12,098 members)", TORCH,
               targets=(Target("over_floor", 1.0), Target("speedup", 3, "auditwheel"), Target("peak_mb", 500))),
]

#: `check` of an installed package's folder, read as a source tree (its top-level modules are read as
#: build helpers: torch's took 75 s on 2 cores until the nineteenth session); no peer checks a tree
FOLDER_CASES: list[Case] = [
    Case("check-torch-2.8-folder", "check torch 2.8.0's package folder, unpacked as pip installs it (1.7 GB)",
         {"tree": Unpacked(TORCH, "torch")},
         cuaudit=Cmd("cuaudit check (folder)", (*CUAUDIT, "check", *CHECK_FLAGS, "{tree}"), ok=(0, 1)),
         targets=(Target("seconds", 20),)),
]



def corpus_wheels() -> list[dict]:
    """The wheels of the corpus manifest (``tests/corpus.toml``), both sets."""
    sys.path.insert(0, str(FETCH_SCRIPT.parent))
    try:
        from fetch_corpus import load_manifest
    finally:
        sys.path.pop(0)
    return [a for a in load_manifest() if a["file"].endswith(".whl")]


def _every_other_wheel(covered: list[Case]) -> list[Case]:
    """A cold `check` against `auditwheel show` for each corpus wheel no case above checks: the
    target is "faster on **every** wheel of the corpus", so the list is the manifest's, not a
    choice (the hand-written cases above carry the stronger targets and the scaling series)."""
    import fnmatch

    patterns = [case.inputs["wheel"].pattern for case in covered]
    out = []
    for art in corpus_wheels():
        if any(fnmatch.fnmatchcase(art["file"], p) for p in patterns):
            continue
        name, version = art["file"].split("-")[:2]
        out.append(check_case(f"check-{name}-{version}".replace("_", "-").lower(),
                              f"check {art['project']} {version}", f"{name}-{version}-*.whl", targets=(FASTER,)))
    return out


CHECK_CASES += _every_other_wheel(CHECK_CASES)

CASES: list[Case] = [
    Case("startup", "start-up: the constant in every row", {},
         cuaudit=Cmd("cuaudit --version", (*CUAUDIT, "--version")),
         peers=(Cmd("auditwheel --version", (*AUDITWHEEL_CMD, "--version"),
                    requires=has_module("auditwheel", "auditwheel (pip install -e '.[bench]')")),),
         floor=Cmd("python -c pass", ("{py}", "-c", "pass")), quick=True,
         targets=(Target("overhead", 1, "auditwheel"),)),
    *CHECK_CASES,
    *FOLDER_CASES,
    # like for like: only what auditwheel also looks at (linking and loading)
    Case("check-cupy-14.2-linkage", "check cupy-cuda12x 14.2.0, linkage family only (CU0, CU2)",
         {"wheel": Corpus(CUPY14)},
         cuaudit=check("--select", "CU0,CU2", label="cuaudit check --select CU0,CU2",
                       requires=has_rules("CU2", "linking and loading")),
         peers=(AUDITWHEEL,), floor=inflate_floor("elf")),
    dynsym_case("dynsym-libcudart", "dynamic symbols of libcudart.so.11.0 (0.7 MB)",
                Member("nvidia_cuda_runtime_cu11-11.8.89-*.whl", "nvidia/cuda_runtime/lib/libcudart.so.11.0"),
                quick=True),
    dynsym_case("dynsym-libtorch_cpu", "dynamic symbols of libtorch_cpu.so (410 MB)",
                Member(TORCH, "torch/lib/libtorch_cpu.so"), targets=(Target("rate", 1e6),)),
    Case("dynsym-libtorch_cpu-wheel", "dynamic symbols of libtorch_cpu.so streamed from the torch wheel",
         {"wheel": Corpus(TORCH)},
         cuaudit=Cmd("cuaudit.facts.elf (streamed)", ("{py}", "-c", DYNSYM_CUAUDIT_STREAM, "{wheel}",
                                                     "torch/lib/libtorch_cpu.so"), summary=True),
         peers=(Cmd("pyelftools (member read into memory)", ("{py}", "-c", DYNSYM_PYELFTOOLS_STREAM, "{wheel}",
                                                             "torch/lib/libtorch_cpu.so"), summary=True,
                    requires=has_module("elftools", "pyelftools")),),
         floor=Cmd("inflate the member (zlib)", ("{py}", "{bench}/floors.py", "inflate", "{wheel}", "--member",
                                                 "torch/lib/libtorch_cpu.so"), summary=True),
         unit="symbols"),
    overlink_case("overlink-rmm", "over-linking of rmm-cu12 24.12.0 (8 modules)", "rmm_cu12-24.12.0-*.whl", (),
                  quick=True),
    overlink_case("overlink-cupy-cuda11x-12.3", "over-linking of cupy-cuda11x 12.3.0 (66 modules, CUDA 11 libs)",
                  "cupy_cuda11x-12.3.0-*.whl", CU11_LIBS),
    devicecode_case("devicecode-cupy-random", "device code of cupy/random/_generator_api (13 MB, 13 entries)",
                    Member(CUPY14, "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so"), quick=True),
    devicecode_case("devicecode-cublasLt", "device code of libcublasLt.so.12 (749 MB, ~6,000 entries)",
                    Member(CUBLAS12, "nvidia/cublas/lib/libcublasLt.so.12"),
                    targets=(Target("speedup", 10, "cuobjdump"), Target("peak_mb", 300))),
    devicecode_case("devicecode-cupy-thrust", "device code of cupy/cuda/thrust (77 MB, 69 MB of device code)",
                    Member(CUPY14, "cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so")),
    Case("devicecode-cublas-wheel", "device code of the whole nvidia-cublas-cu12 wheel (581 MB zip), read in place",
         {"wheel": Corpus(CUBLAS12)},
         cuaudit=Cmd("cuaudit archs", (*CUAUDIT, "archs", "--no-cache", "{wheel}"), ok=(0, 1),
                     requires=has_module("cuaudit.commands.archs", "feature not present (cuaudit archs)")),
         floor=inflate_floor("elf")),
    devicecode_case("devicecode-libtorch_cuda", "device code of libtorch_cuda.so (1 GB, 2,758 entries)",
                    Member(TORCH, "torch/lib/libtorch_cuda.so"),
                    targets=(Target("speedup", 10, "cuobjdump"), Target("peak_mb", 300))),
    capi_case("capi-rmm", "Cython C-API imports of rmm-cu12 24.12.0", "rmm_cu12-24.12.0-*.whl", quick=True),
    capi_case("capi-cuda-bindings", "Cython C-API imports of cuda-bindings 13.0.3", "cuda_bindings-13.0.3-*.whl",
              targets=(Target("seconds", 2),)),
    *env_cases("env-small", "env of 3 small distributions", SMALL_ENV, quick=True),
    # issue 14: what a user meets first, `python -m venv` (pip and its vendored packages)
    *env_cases("env-fresh-venv", "env of a fresh `python -m venv` (pip)", FreshVenv(),
               cold_targets=(Target("overhead", 1.5, "pip inspect"),)),
    # issue 14: 88 popular distributions, 14.4 k Python files (benchmarks/accuracy.py's pinned set)
    *env_cases("env-popular", "env of 88 popular distributions (accuracy.py's tune set)", PopularVenv(),
               cold_targets=(Target("seconds", 8),), cached_targets=(Target("seconds", 1),), copied=True),
    # issue 14: what a user runs when one import breaks, `cuaudit env --package NAME`: the named
    # distributions and what they require are judged, the others read only where those need them
    *(Case(f"env-popular-package-{pkg}-cold", f"env --package {pkg} of the 88 popular distributions, no fact cache",
           {"env": PopularVenv()},
           cuaudit=Cmd(f"cuaudit env --package {pkg} (cold)",
                       (*CUAUDIT, "env", "--python", "{env}", "--package", pkg, "--isolated", "--color", "never",
                        "-q", "--cache-dir", "{fresh}"), ok=(0, 1)),
           peers=(Cmd("cuaudit env, the whole environment (cold)",
                      (*CUAUDIT, "env", "--python", "{env}", "--isolated", "--color", "never", "-q",
                       "--cache-dir", "{fresh}"), ok=(0, 1)),
                  Cmd("pip inspect", ("{py}", "-m", "pip", "--python", "{env}", "inspect"))))
      for pkg in ("requests", "scipy", "scikit-learn")),
    # the same packages as uv installs them by default: no bytecode files, so no __pycache__ header
    # vouches for a source no rule reads (the format check reads each one)
    Case("env-popular-without-bytecode-cold", "env of the 88 popular distributions without __pycache__ "
         "(uv's default), no fact cache", {"env": CopiedVenv(PopularVenv(), bytecode=False)},
         cuaudit=Cmd("cuaudit env (cold)", (*CUAUDIT, "env", "--python", "{env}", "--isolated", "--color", "never",
                                            "-q", "--cache-dir", "{fresh}"), ok=(0, 1)),
         peers=(Cmd("pip inspect", ("{py}", "-m", "pip", "--python", "{env}", "inspect")),),
         floor=Cmd("read ELF+py+metadata files", ("{py}", "{bench}/floors.py", "read-tree", "{env.site}"),
                   summary=True)),
    *env_cases("env-large", "env of a full CUDA Python environment (torch, cupy, cuda-bindings, rmm, "
               "CUDA 11 and 12 libraries)", LARGE_ENV,
               cold_targets=(Target("seconds", 10),), cached_targets=(Target("seconds", 1),)),
    # submodule traps: the static audit vs what people do today, importing
    # every package in a fresh interpreter (cuaudit's own opt-in --probe)
    *imports_cases("imports-env-large", "submodule traps (CU101, CU102) of the large environment", LARGE_ENV),
    # the NEP 50 tracer's cost on the user's own program (cuaudit trace; the
    # target is docs/promotion.md's: under 2x when no scalar operands occur)
    *(trace_case(name, targets=(Target("work_overhead", 2, "python"),) if name.startswith("arrays") else ())
      for name in TRACE_WORKLOADS),
    # an environment that exists already: the GPU machine's CUDA Python stack
    # (CUAUDIT_BENCH_PYTHON=/path/to/python; see scripts/device/bench_env.sh)
    *env_cases("env-here", "env of $CUAUDIT_BENCH_PYTHON's environment", Interpreter("CUAUDIT_BENCH_PYTHON"),
               cold_targets=(Target("seconds", 10), Target("peak_mb", 1000)), cached_targets=(Target("seconds", 1),),
               full=False),
]

#: the cases whose cuaudit time and memory are plotted against the bytes read
SCALING = [c.name for c in CHECK_CASES]

#: tools whose versions the results record
TOOLS = {
    "readelf": ["readelf", "--version"],
    "ldd": ["ldd", "--version"],
}

"""``cuaudit archs PATH...``: the GPU architectures of the device code in each module."""

from __future__ import annotations

import argparse
import json
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "archs",
        help="list the GPU architectures (SASS, PTX) each module carries",
        description="Read the CUDA fat binaries of every ELF file in wheels, sdists, trees, files or an environment "
        "and print, per module, its SASS and PTX architectures. Nothing is run; cuobjdump is not needed.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="wheels, trees, ELF files (default: the environment with --env)")
    p.add_argument("--env", action="store_true", help="the installed distributions of this interpreter (or --python)")
    p.add_argument("--python", metavar="PYTHON", help="interpreter of the environment to read")
    p.add_argument("--format", "-f", choices=("text", "json", "cuobjdump"), default="text",
                   help="text table, JSON (every entry), or cuobjdump's --list-elf --list-ptx lines")
    p.add_argument("--all", action="store_true", help="also list modules without device code")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the fact cache")
    p.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (default: CPUs)")
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    import dataclasses

    from cuaudit.config import Config
    from cuaudit.engine import gather
    from cuaudit.facts.fatbin import DeviceCode, cuobjdump_listing

    env = (args.python or True) if (args.env or args.python or not args.paths) else None
    config = dataclasses.replace(Config(), cache=not args.no_cache, jobs=args.jobs)
    got = gather(args.paths, env=env, config=config, extractors=("fatbin",))
    if any(f.code == "CU008" for f in got.problems):
        print(f"cuaudit: error: {next(f.message for f in got.problems if f.code == 'CU008')}", file=sys.stderr)
        return 2
    got.extraction.store.close()
    rows = []
    for i, art in enumerate(got.artifacts):
        for m in art.members:
            code = got.extraction.facts.get((i, m.path, "fatbin"))
            if not isinstance(code, DeviceCode) or (not code.has_device_code and not args.all):
                continue
            rows.append((art, m.path, code))
    problems = got.problems
    if args.format == "json":
        out = [
            {
                "artifact": art.ref.display,
                "module": path,
                "sections": list(code.sections),
                "sass": [e.arch for e in code.sass()],
                "ptx": [e.arch for e in code.ptx()],
                "entries": [
                    {"kind": e.kind, "arch": e.arch, "section": e.section, "offset": e.offset,
                     "size": e.stored_size, "uncompressed_size": e.uncompressed_size,
                     "compression": e.compression, "version": e.version}
                    for e in code.entries
                ],
                "notes": list(code.notes),
            }
            for art, path, code in rows
        ]
        json.dump({"modules": out, "problems": [f"{f.location}: {f.message}" for f in problems]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "cuobjdump":
        for art, path, code in rows:
            print(f"# {art.ref.display}:{path}")
            print("\n".join(cuobjdump_listing(code, path)))
    else:
        print(render_table(rows))
        for f in problems:
            print(f"{f.location}: {f.code} {f.message}", file=sys.stderr)
    return 0


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render_table(rows) -> str:
    """One line per module: SASS architectures, PTX architectures, entry counts, sizes, compression."""
    if not rows:
        return "no device code found"
    header = ("module", "SASS", "PTX", "entries", "size", "compression")
    lines = []
    current = None
    table = []
    for art, path, code in rows:
        if art.ref.display != current:
            current = art.ref.display
            table.append((f"[{current}]", "", "", "", "", ""))
        sass = _archs(code.sass())
        ptx = _archs(code.ptx())
        entries = f"{len(code.sass())}+{len(code.ptx())}"
        size = _size(sum(e.stored_size for e in code.runnable))
        comp = ",".join(sorted({e.compression for e in code.runnable})) or "-"
        table.append((path, sass or "-", ptx or "-", entries, size, comp))
    widths = [max(len(r[i]) for r in table + [header]) for i in range(len(header))]
    widths[1] = min(widths[1], 60)
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines.append(fmt.format(*header).rstrip())
    for r in table:
        lines.append(fmt.format(*r).rstrip())
    return "\n".join(lines)


def _archs(entries) -> str:
    return " ".join(sorted(dict.fromkeys(e.arch for e in entries), key=lambda a: (int("".join(c for c in a.split("_")[1] if c.isdigit())), a)))

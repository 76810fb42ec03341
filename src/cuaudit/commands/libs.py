"""``cuaudit libs [PATH...] [--env]``: where every needed library resolves, and why (a static ``ldd``).

For each ELF file of the wheels, trees, files or installed environment: each
``DT_NEEDED`` entry, where the dynamic loader would find it and through which
step (``DT_RPATH``, ``LD_LIBRARY_PATH``, ``DT_RUNPATH``, ``ld.so.cache``, a
system directory), or where it exists off the loader's path, or every place
tried; whether it is a CUDA library or the driver; whether the file uses it
and on what evidence.  Nothing is loaded or run (unlike ``ldd``).
"""

from __future__ import annotations

import argparse
import json
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "libs",
        help="where each needed library of the ELF files resolves, with provenance (a static ldd)",
        description="List, for every ELF file, each DT_NEEDED library: where it resolves and through which loader "
        "step, or every place searched; CUDA/driver libraries; used or not, and the evidence. Nothing is loaded.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="wheels, trees or files (default with --env: none)")
    p.add_argument("--env", action="store_true", help="the installed distributions of this interpreter (or --python)")
    p.add_argument("--python", metavar="PYTHON", help="interpreter of the environment (implies --env)")
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="PATH",
                   help="extra wheels or library folders that supply needed libraries")
    p.add_argument("--gpu-only", action="store_true", help="only files that need CUDA libraries or the driver")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the fact cache")
    p.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from cuaudit.config import Config
    from cuaudit.engine import RuleContext, gather
    from cuaudit.rules.linkage import Linkage

    if not args.paths and not (args.env or args.python):
        print("cuaudit libs: give a PATH or --env", file=sys.stderr)
        return 2
    config = Config(cache=not args.no_cache, options={"linkage": {"with": list(args.with_)}})
    got = gather(args.paths, env=(args.python or True) if (args.env or args.python) else None, config=config,
                 extractors=("elf",))
    interpreter = [f for f in got.problems if f.code == "CU008"]
    if interpreter:
        print(f"cuaudit libs: {interpreter[0].message}", file=sys.stderr)
        return 2
    got.extraction.store.close()
    extraction = got.extraction
    ctx = RuleContext(config, got.artifacts, extraction.facts, got.environment, [])
    lk = Linkage(ctx)
    rows = []
    for i, art, member, facts in lk.files():
        usage = lk.usage(i, member.path, facts)
        libs = []
        for lib in facts.needed:
            res = lk.resolve(i, member.path, facts, lib)
            u = usage.get(lib)
            libs.append({
                "needed": lib,
                "kind": lk.kind(lib),
                "found_via": res.found_via,
                "where": res.where,
                "provider": res.provider,
                "on_loader_path": res.on_loader_path,
                "tried": list(res.tried),
                "used": None if u is None else u.used,
                "evidence": "" if u is None else u.evidence,
            })
        if args.gpu_only and not any(x["kind"] in ("cuda", "driver") for x in libs):
            continue
        rows.append({"artifact": art.ref.display, "member": member.path, "soname": facts.soname,
                     "rpath": list(facts.rpath), "runpath": list(facts.runpath), "needed": libs})
    for f in got.problems:
        print(f"{f.location}: {f.code} {f.message}", file=sys.stderr)
    if args.format == "json":
        json.dump({"files": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for row in rows:
        print(f"{row['artifact']}: {row['member']}")
        for x in row["needed"]:
            tag = {"driver": " [driver]", "cuda": " [cuda]"}.get(x["kind"], "")
            use = {True: "used", False: "UNUSED", None: "use unknown"}[x["used"]]
            if x["found_via"]:
                off = "" if x["on_loader_path"] else " (off the loader's path)"
                prov = f" [{x['provider']}]" if x["provider"] else ""
                print(f"    {x['needed']}{tag} => {x['where']}{prov} via {x['found_via']}{off}; {use} ({x['evidence'] or '-'})")
            else:
                print(f"    {x['needed']}{tag} => not found; {use} ({x['evidence'] or '-'}); tried: {'; '.join(x['tried'])}")
    return 0

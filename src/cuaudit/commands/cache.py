"""``cuaudit cache info|clean|prune``: where the cache is, how big, and emptying it."""

from __future__ import annotations

import argparse
import json
import sys


def configure_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="show, prune or empty the cache (facts and downloaded releases)",
        description="The cache holds the facts extracted from files (SQLite) and the releases fetched for "
        "NAME==VERSION inputs. It is kept under cache-max-size (default 5GB), least recently used first.",
    )
    p.add_argument("action", choices=("info", "clean", "prune"),
                   help="info: location, sizes, entries; clean: empty it; prune: apply the size cap now")
    p.add_argument("--facts", action="store_true", help="clean: only the fact cache")
    p.add_argument("--downloads", action="store_true", help="clean: only the downloads")
    p.add_argument("--cache-dir", help="cache directory (env CUAUDIT_CACHE_DIR)")
    p.add_argument("--max-size", help="prune: the cap to apply (default: cache-max-size)")
    p.add_argument("--config", metavar="PYPROJECT", help="read [tool.cuaudit] from this file")
    p.add_argument("--isolated", action="store_true", help="ignore configuration files")
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.set_defaults(func=execute)


def _mb(n: int) -> str:
    return f"{n / 1024**2:.1f} MB"


def execute(args: argparse.Namespace) -> int:
    from cuaudit import config as config_mod
    from cuaudit import store

    config = config_mod.load(config_file=args.config, isolated=args.isolated,
                             overrides={"cache-dir": args.cache_dir, "cache-max-size": args.max_size})
    directory = config.cache_dir or store.default_cache_dir()
    if args.action == "clean":
        both = not (args.facts or args.downloads)
        before = store.clean(directory, facts=both or args.facts, downloads=both or args.downloads)
        freed = (before.facts_bytes if both or args.facts else 0) + (before.downloads_bytes if both or args.downloads else 0)
        print(f"cuaudit cache: removed {_mb(freed)} from {directory}")
        return 0
    if args.action == "prune":
        freed = store.prune(directory, config.cache_max_size)
        print(f"cuaudit cache: freed {_mb(freed)} (cap {_mb(config.cache_max_size)})")
        return 0
    u = store.cache_usage(directory)
    doc = {
        "directory": u.directory,
        "max_size_bytes": config.cache_max_size,
        "total_bytes": u.total_bytes,
        "facts": {"path": u.facts_path, "bytes": u.facts_bytes, "entries": u.facts_entries},
        "downloads": {"path": u.downloads_path, "bytes": u.downloads_bytes, "entries": u.downloads_entries},
    }
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return 0
    cap = _mb(config.cache_max_size) if config.cache_max_size else "none"
    sys.stdout.write(
        f"Cache      {u.directory}  ({_mb(u.total_bytes)} of {cap})\n"
        f"Facts      {_mb(u.facts_bytes)}, {u.facts_entries} entries  {u.facts_path}\n"
        f"Downloads  {_mb(u.downloads_bytes)}, {u.downloads_entries} releases  {u.downloads_path}\n"
    )
    return 0


def enforce_cap(config) -> None:
    """After a command that may have grown the cache: prune it to ``cache-max-size``."""
    if not config.cache:
        return
    from cuaudit import store

    try:
        store.prune(config.cache_dir or store.default_cache_dir(), config.cache_max_size)
    except OSError:
        pass  # a cache that cannot be pruned never fails the audit

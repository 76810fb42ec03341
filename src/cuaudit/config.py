"""Configuration: defaults < ``[tool.cuaudit]`` in pyproject.toml < ``CUAUDIT_*`` < command line.

Every key is documented in ``docs/configuration.md``.  Unknown keys and bad
values are usage errors (exit 2) that name the key and where it came from.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from cuaudit.model import ConfigError, Severity


#: Allow-lists that hold out of the box.  libtorch_global_deps.so exists only to be preloaded
#: (torch/__init__.py loads it RTLD_GLOBAL so that CUDA libraries come in first): its DT_NEEDED
#: entries are its purpose, not over-linking (seen on the GPU machine with torch 2.11).
DEFAULT_ALLOW: Mapping[str, tuple[str, ...]] = {"preload-libraries": ("libtorch_global_deps.so",)}


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    extend_ignore: tuple[str, ...] = ()
    #: glob over member paths -> code prefixes ignored there
    per_path_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: code prefix -> severity (the longest prefix wins)
    severity: Mapping[str, Severity] = field(default_factory=dict)
    fail_on: Severity = Severity.WARNING
    #: GPU architectures the built code must run on (CU6xx), e.g. ("sm_80", "sm_90")
    target_archs: tuple[str, ...] = ()
    #: globs of tree paths never read
    exclude: tuple[str, ...] = ()
    baseline: str | None = None
    #: named allow-lists, e.g. allow.preload-libraries = ["libtorch_global_deps.so"]
    #: the defaults are data, replaced (not extended) by a configured list of the same name
    allow: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_ALLOW))
    #: per-family option tables: [tool.cuaudit.linkage] -> options["linkage"]
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    jobs: int = 0  # 0: one worker per CPU
    cache: bool = True
    cache_dir: str | None = None
    #: the cache directory's size cap (facts and downloads), least recently used pruned first; 0: no cap
    cache_max_size: int = 5 * 1024**3
    probe: bool = False
    probe_timeout: float = 60.0
    #: ``env --package``: the distributions (canonical names) whose findings, with those of what they
    #: require, the report keeps; rules may leave the others' findings uncomputed (RuleContext.in_focus)
    focus: tuple[str, ...] = ()
    #: where the configuration came from (for reports and errors)
    source: str = "defaults"
    #: family table -> where it came from (its errors name that file)
    option_sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def selected(self) -> tuple[str, ...]:
        return self.select + self.extend_select

    @property
    def ignored(self) -> tuple[str, ...]:
        return self.ignore + self.extend_ignore

    def severity_for(self, code: str, default: Severity) -> Severity:
        # the longest matching prefix wins; ALL matches every code, below any prefix
        best = max((p for p in self.severity if p == "ALL" or code.startswith(p)),
                   key=lambda p: -1 if p == "ALL" else len(p), default=None)
        return self.severity[best] if best is not None else default

    def allowed(self, name: str) -> tuple[str, ...]:
        return tuple(self.allow.get(name, ()))

    def section(self, name: str) -> Mapping[str, Any]:
        return self.options.get(name, {})


_LIST_KEYS = {"select", "ignore", "extend-select", "extend-ignore", "target-archs", "exclude"}
_SCALAR_KEYS = {"fail-on", "baseline", "jobs", "cache", "cache-dir", "cache-max-size", "probe", "probe-timeout"}
_TABLE_KEYS = {"per-path-ignores", "severity", "allow"}


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when one of ``choices`` is close to ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _from_file(where: str) -> bool:
    return where not in ("command line", "environment (CUAUDIT_*)")


def _as_tuple(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str) and _from_file(where):
        # TOML has lists: `select = "CU2"` is a mistake for `select = ["CU2"]`, not a shorthand
        raise ConfigError(f"{where}: '{key}' must be a list of strings, like {key} = [\"{value}\"]")
    if isinstance(value, str):
        value = [v for v in (s.strip() for s in value.split(",")) if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: '{key}' must be a list of strings")
    return tuple(value)


def _codes(values: tuple[str, ...], key: str, where: str) -> tuple[str, ...]:
    out = []
    for v in values:
        u = v.strip().upper()
        if u != "ALL" and not (u.startswith("CU") and u[2:].isdigit() and len(u) <= 5):
            raise ConfigError(f"{where}: '{key}' has {v!r}, which is not a rule code or prefix (like CU2 or CU201)")
        out.append(u)
    return tuple(out)


_ARCH = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$")
#: compute capabilities NVIDIA has shipped (major*10 + minor); the a/f suffixes exist from 9.0 on
KNOWN_COMPUTE_CAPABILITIES = (
    20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121,
)


def _archs(values: tuple[str, ...], where: str) -> tuple[str, ...]:
    out = []
    known = [f"sm_{c}" for c in KNOWN_COMPUTE_CAPABILITIES]
    for v in values:
        a = v.strip().lower()
        m = _ARCH.match(a)
        if not m or int(m.group(2)) not in KNOWN_COMPUTE_CAPABILITIES or (m.group(3) and int(m.group(2)) < 90):
            raise ConfigError(f"{where}: 'target-archs' has {v!r}, which is not a GPU architecture "
                              f"(like sm_80, sm_90a or compute_90){did_you_mean(a, known)}")
        out.append(a)
    return tuple(out)


def apply(config: Config, values: Mapping[str, Any], where: str) -> Config:
    """A new Config with ``values`` (pyproject spelling: kebab-case) applied on top."""
    changes: dict[str, Any] = {}
    options = dict(config.options)
    for key, value in values.items():
        attr = key.replace("-", "_")
        if key in _LIST_KEYS:
            v = _as_tuple(value, key, where)
            if key in {"select", "ignore", "extend-select", "extend-ignore"}:
                v = _codes(v, key, where)
            elif key == "target-archs":
                v = _archs(v, where)
            changes[attr] = v
        elif key == "fail-on":
            try:
                changes[attr] = Severity.parse(str(value))
            except ValueError as exc:
                raise ConfigError(f"{where}: 'fail-on': {exc}") from None
        elif key in ("jobs",):
            try:
                changes[attr] = int(value)
                if changes[attr] < 0 or isinstance(value, bool):
                    raise ValueError
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: 'jobs' must be an integer >= 0 (0: one per CPU)") from None
        elif key == "probe-timeout":
            try:
                changes[attr] = float(value)
                if not changes[attr] > 0 or isinstance(value, bool):
                    raise ValueError
            except (TypeError, ValueError):
                raise ConfigError(f"{where}: 'probe-timeout' must be a positive number of seconds") from None
        elif key == "cache-max-size":
            try:
                changes[attr] = parse_size(value)
            except ValueError:
                raise ConfigError(f"{where}: 'cache-max-size' must be a size such as 5GB, 500MB or 0 (no cap)") from None
        elif key in ("cache", "probe"):
            changes[attr] = _as_bool(value, key, where)
        elif key in ("baseline", "cache-dir"):
            changes[attr] = None if value in (None, "") else str(value)
        elif key == "per-path-ignores":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: 'per-path-ignores' must be a table of glob = [codes]")
            changes[attr] = {str(g): _codes(_as_tuple(c, key, where), key, where) for g, c in value.items()}
        elif key == "severity":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: 'severity' must be a table of CODE = \"error|warning|info\"")
            try:
                sev = {_codes((c,), key, where)[0]: Severity.parse(str(s)) for c, s in value.items()}
            except ValueError as exc:
                raise ConfigError(f"{where}: 'severity': {exc}") from None
            changes[attr] = {**config.severity, **sev}
        elif key == "allow":
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: 'allow' must be a table of name = [entries]")
            changes[attr] = {**config.allow, **{str(k): _as_tuple(v, f"allow.{k}", where) for k, v in value.items()}}
        elif isinstance(value, Mapping):
            # a family's own table; its name and keys are checked against what the
            # families declare by validate(), which knows the rules
            options[key] = {**options.get(key, {}), **value}
            sources = dict(config.option_sources)
            sources[key] = where
            changes["option_sources"] = sources
        else:
            known = sorted(_LIST_KEYS | _SCALAR_KEYS | _TABLE_KEYS)
            raise ConfigError(f"{where}: unknown key '{key}'{did_you_mean(key, known)} (known: {', '.join(known)})")
    changes["options"] = options
    changes["source"] = where if config.source == "defaults" else f"{config.source} + {where}"
    return dataclasses.replace(config, **changes)


@dataclass(frozen=True)
class Option:
    """One option of a family table (``[tool.cuaudit.linkage] with = [...]``), declared as data
    by the family's module (``OPTIONS``) and rendered in its rules' docs."""

    type: type  # list (of strings), str, bool, int or float
    doc: str

    def check(self, value: Any, key: str, where: str) -> Any:
        if self.type is list:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: '{key}' must be a list of strings")
        elif self.type is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{where}: '{key}' must be a number")
        elif self.type is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where}: '{key}' must be an integer")
        elif not isinstance(value, self.type):
            raise ConfigError(f"{where}: '{key}' must be a {self.type.__name__}")
        return value


def validate(
    config: Config,
    *,
    codes: Iterable[str],
    families: Mapping[str, Mapping[str, Option]],
    allow_lists: Iterable[str],
) -> None:
    """What can only be checked knowing the rules: selectors that match no rule,
    family tables and their keys, allow-list names.  Raises ConfigError."""
    codes = sorted(codes)
    prefixes = sorted({c[:n] for c in codes for n in (3, 4, 5)} | {"ALL"})
    selectors = [("select", config.select), ("ignore", config.ignore), ("extend-select", config.extend_select),
                 ("extend-ignore", config.extend_ignore), ("severity", tuple(config.severity))]
    selectors += [(f"per-path-ignores.{g!r}", c) for g, c in config.per_path_ignores.items()]
    for key, values in selectors:
        for v in values:
            if v != "ALL" and not any(c.startswith(v) for c in codes):
                raise ConfigError(f"{config.source}: '{key}' has {v!r}, which matches no rule"
                                  f"{did_you_mean(v, prefixes)} (`cuaudit rules` lists them)")
    known_allow = sorted(allow_lists)
    for name in config.allow:
        if name not in known_allow and name not in DEFAULT_ALLOW:
            raise ConfigError(f"{config.source}: unknown allow-list 'allow.{name}'{did_you_mean(name, known_allow)} "
                              f"(known: {', '.join(known_allow)})")
    for table, values in config.options.items():
        where = config.option_sources.get(table, config.source)
        if table not in families:
            raise ConfigError(f"{where}: unknown table [tool.cuaudit.{table}]{did_you_mean(table, families)} "
                              f"(family tables: {', '.join(sorted(families))})")
        declared = families[table]
        for key, value in values.items():
            if key not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise ConfigError(f"{where}: [tool.cuaudit.{table}] has unknown option '{key}'"
                                  f"{did_you_mean(key, declared)} (its options: {known})")
            declared[key].check(value, f"{table}.{key}", where)


def _as_bool(value: Any, key: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{where}: '{key}' must be true or false")


#: Keys a configuration file may not set, with the reason.  Files travel with
#: what is audited (a checked-out project's pyproject.toml is found from the
#: working directory), so nothing in them may make cuaudit run code: `probe`
#: imports the audited code; the fact cache holds pickles, which run code when
#: loaded, so a `cache-dir` the project chose could be one it filled itself.
#: These come from the command line or the user's own environment only.
FILE_FORBIDDEN = {
    "probe": "it would let the project run its own code; pass --probe or set CUAUDIT_PROBE=1",
    "cache-dir": "the cache holds pickled facts, loaded as code: a project must not choose it; "
                 "pass --cache-dir or set CUAUDIT_CACHE_DIR",
}


def refuse_code_running(table: Mapping[str, Any], where: str) -> None:
    """A usage error if a configuration file sets an option that runs code (``probe = false`` is harmless)."""
    for key, why in FILE_FORBIDDEN.items():
        if key in table and not (key == "probe" and table[key] is False):
            raise ConfigError(f"{where}: '{key}' cannot be set in a configuration file: {why}")


def find_pyproject(start: str) -> str | None:
    """The nearest pyproject.toml with a [tool.cuaudit] table, from ``start`` upward."""
    d = os.path.abspath(start)
    while True:
        p = os.path.join(d, "pyproject.toml")
        if os.path.isfile(p):
            try:
                with open(p, "rb") as fh:
                    if b"[tool.cuaudit" in fh.read():
                        return p
            except OSError:
                pass
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def load_toml(path: str) -> Mapping[str, Any]:
    """A TOML file of the user's (configuration, survey spec); any problem is a ConfigError naming it."""
    from cuaudit.compat import tomllib  # here: a run without a configuration file never parses TOML

    try:
        if not os.path.isfile(path):  # a FIFO would block the open forever
            raise ConfigError(f"{path}: not a regular file")
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None


def load_pyproject(path: str) -> Mapping[str, Any]:
    data = load_toml(path)
    tool = data.get("tool", {})
    if not isinstance(tool, Mapping):
        raise ConfigError(f"{path}: [tool] must be a table (it is {type(tool).__name__})")
    table = tool.get("cuaudit", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: [tool.cuaudit] must be a table")
    return table


#: CUAUDIT_* variables, in pyproject spelling
ENV_KEYS = (
    "select", "ignore", "extend-select", "extend-ignore", "fail-on", "target-archs", "exclude",
    "baseline", "jobs", "cache", "cache-dir", "cache-max-size", "probe", "probe-timeout",
)


def parse_size(value: Any) -> int:
    """Bytes from 5GB, 500 MB, 1.5GiB, 1048576 (decimal and binary units alike are powers of 1024)."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value < 0:
            raise ValueError(value)
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(value).lower())
    if not m:
        raise ValueError(value)
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " "))


def from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    out = {}
    for key in ENV_KEYS:
        var = "CUAUDIT_" + key.upper().replace("-", "_")
        if var in environ:
            out[key] = environ[var]
    return out


def load(
    *,
    config_file: str | None = None,
    start: str = ".",
    isolated: bool = False,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The effective configuration, with every layer applied in order."""
    config = Config()
    if not isolated:
        path = config_file or find_pyproject(start)
        if path:
            table = dict(load_pyproject(path))
            refuse_code_running(table, path)
            # Paths in the file are relative to the file, not to wherever cuaudit runs.
            for key in ("baseline",):
                value = table.get(key)
                if isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)):
                    table[key] = os.path.join(os.path.dirname(os.path.abspath(path)), value)
                elif isinstance(value, str) and value:
                    table[key] = os.path.expanduser(value)
            config = apply(config, table, path)
    env = from_environ(os.environ if environ is None else environ)
    if env:
        config = apply(config, env, "environment (CUAUDIT_*)")
    if overrides:
        config = apply(config, {k: v for k, v in overrides.items() if v is not None}, "command line")
    return config

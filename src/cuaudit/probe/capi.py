"""``--probe`` for the Cython C-API: import a consumer module against stand-in providers.

Opt-in only: this loads the audited extension module in a subprocess (with
a timeout).  Every provider module the consumer cimports from is replaced in
``sys.modules`` by a stand-in whose ``__pyx_capi__`` records what Cython's
import checks ask for:

- the dict's keys are ``str`` subclasses whose ``__eq__`` logs each lookup
  (a dict holding non-exact-``str`` keys compares on every hash match, so a
  lookup of a name we offered is seen); a name we did not offer fails with
  "M does not export expected C function NAME", which names it;
- each capsule carries the signature we believe; a wrong one fails with
  "C function M.NAME has wrong signature (expected SIG, got ...)", which
  gives the expected signature;
- extension types are stand-in classes of a chosen ``__basicsize__``; a
  wrong size fails with "M.T size changed ... Expected N from C header".

The consumer is re-run (a fresh interpreter each time: Cython modules cannot
be initialised twice) until a run learns nothing new.  Function pointers in
the capsules and in stand-in vtables point to a callback that ends the
process: if the module body calls a C function once the imports succeeded,
the probe stops there instead of running it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

from cuaudit.model import ProbeRecord
from cuaudit.inputs.artifact import read_regular
from cuaudit.inputs.process import MAX_OUTPUT, BoundExceeded, run_bounded

_CHILD = r'''
import ctypes, importlib.util, json, os, sys, types
spec_in = json.load(open(sys.argv[1]))
log = open(sys.argv[2], "a", buffering=1)
def emit(**kw):
    log.write(json.dumps(kw) + "\n")

@ctypes.CFUNCTYPE(None)
def _stop():
    emit(event="called")
    log.flush()
    os._exit(0)
STOP = ctypes.cast(_stop, ctypes.c_void_p).value
# vtables and variables point into a buffer of pointers to _stop
BUF = (ctypes.c_void_p * 4096)(*([STOP] * 4096))
BUFADDR = ctypes.addressof(BUF)
new_capsule = ctypes.pythonapi.PyCapsule_New
new_capsule.restype = ctypes.py_object
new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_keep = []

class Key(str):
    def __hash__(self):
        return str.__hash__(self)
    def __eq__(self, other):
        if str.__eq__(self, other):
            emit(event="lookup", module=self.module, name=str(self))
            return True
        return False

class StandIn(types.ModuleType):
    def __getattribute__(self, attr):
        if not attr.startswith("__"):
            emit(event="attr", module=types.ModuleType.__getattribute__(self, "__name__"), name=attr)
        return types.ModuleType.__getattribute__(self, attr)

for mod, entry in spec_in["modules"].items():
    m = StandIn(mod)
    capi = {}
    for name, (sig, kind) in entry["capi"].items():
        k = Key(name); k.module = mod
        b = sig.encode(); _keep.append(b)
        capi[k] = new_capsule(STOP if kind == "function" else BUFADDR, b, None)
    m.__pyx_capi__ = capi
    for tname, size in entry["types"].items():
        n = max(0, (size - 16) // 8)
        t = type(tname, (object,), {"__slots__": tuple("s%d" % i for i in range(n)), "__module__": mod})
        t.__pyx_vtable__ = new_capsule(BUFADDR, None, None)
        setattr(m, tname, t)
    sys.modules[mod] = m
    # PyImport_ImportModule("a.b") imports "a" first: stand-in parents (the real
    # package's __init__ might import the consumer itself)
    parts = mod.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            p = types.ModuleType(parent)
            p.__path__ = []
            sys.modules[parent] = p
    if len(parts) > 1:
        setattr(sys.modules[".".join(parts[:-1])], parts[-1], m)

name, path = spec_in["consumer"], spec_in["path"]
try:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    emit(event="imported")
except BaseException as exc:
    emit(event="error", type=type(exc).__name__, message=str(exc))
'''

import re

_NO_EXPORT = re.compile(r"^(?P<mod>\S+) does not export expected C (?P<kind>function|variable) (?P<name>\w+)")
_WRONG_SIG = re.compile(
    r"^C (?P<kind>function|variable) (?P<mod>\S+)\.(?P<name>\w+) has wrong signature \(expected (?P<sig>.*), got .*\)$"
)
_SIZE = re.compile(r"^(?P<mod>\S+)\.(?P<cls>\w+) size changed, may indicate binary incompatibility\. Expected (?P<size>\d+)")
_NOT_TYPE = re.compile(r"^(?P<mod>\S+)\.(?P<cls>\w+) is not a type object")
_NO_ATTR = re.compile(r"module '(?P<mod>[^']+)' has no attribute '(?P<cls>\w+)'")


@dataclass
class ProbeResult:
    """What the consumer's import checks asked for (each confirmed by a run)."""

    consumer: str
    imports: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (module, name) -> (sig, kind)
    type_sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    runs: int = 0
    seconds: float = 0.0
    outcome: str = ""
    complete: bool = False


def probe_consumer(
    python: str,
    module: str,
    path: str,
    providers: dict[str, dict],
    *,
    timeout: float = 60.0,
    max_runs: int = 400,
    sys_path: tuple[str, ...] = (),
) -> ProbeResult:
    """Run the consumer's imports against stand-ins until nothing new is learnt.

    ``providers``: module -> {"capi": {name: (sig, kind)}, "types": {name: size}},
    the starting guess (from the static facts; empty dicts work, slowly).
    """
    state = {m: {"capi": dict(v.get("capi", {})), "types": dict(v.get("types", {}))} for m, v in providers.items()}
    result = ProbeResult(module)
    started = time.perf_counter()
    env = dict(os.environ)
    if sys_path:
        env["PYTHONPATH"] = os.pathsep.join(sys_path)
    with tempfile.TemporaryDirectory(prefix="cuaudit-probe-") as tmp:
        spec_file, log_file, child = (os.path.join(tmp, n) for n in ("spec.json", "log.jsonl", "child.py"))
        with open(child, "w") as fh:
            fh.write(_CHILD)
        while result.runs < max_runs:
            result.runs += 1
            with open(spec_file, "w") as fh:
                json.dump({"modules": state, "consumer": module, "path": path}, fh)
            open(log_file, "w").close()
            try:
                run_bounded([python, "-S", child, spec_file, log_file], env=env, timeout=timeout)
            except BoundExceeded as exc:
                result.outcome = f"timed out after {timeout:g}s" if exc.timed_out else f"stopped: {exc}"
                break
            events = _read_events(log_file)
            if events is None:
                result.outcome = f"the probe's log is not what the probe writes (over {MAX_OUTPUT} bytes, or not its JSON lines)"
                break
            lookups = {(e["module"], e["name"]) for e in events if e["event"] == "lookup"
                       and e["name"] in state.get(e["module"], {}).get("capi", {})}
            attrs = {(e["module"], e["name"]) for e in events if e["event"] == "attr"}
            for key in lookups:
                sig, kind = state[key[0]]["capi"][key[1]]
                result.imports[key] = (sig, kind)
            for key in attrs:
                if key[1] in state.get(key[0], {}).get("types", {}):
                    result.type_sizes.setdefault(key, state[key[0]]["types"][key[1]])
            errors = [e for e in events if e["event"] == "error"]
            learnt = False
            if errors:
                msg = errors[-1]["message"]
                m = _NO_EXPORT.match(msg)
                if m and m["mod"] in state:
                    state[m["mod"]]["capi"][m["name"]] = ("?", m["kind"])
                    learnt = True
                m = m or _WRONG_SIG.match(msg)
                w = _WRONG_SIG.match(msg)
                if w and w["mod"] in state:
                    state[w["mod"]]["capi"][w["name"]] = (w["sig"], w["kind"])
                    result.imports[(w["mod"], w["name"])] = (w["sig"], w["kind"])
                    learnt = True
                s = _SIZE.match(msg)
                if s and s["mod"] in state:
                    size = int(s["size"])
                    result.type_sizes[(s["mod"], s["cls"])] = size  # the message is authoritative
                    if state[s["mod"]]["types"].get(s["cls"]) != size:
                        state[s["mod"]]["types"][s["cls"]] = size
                        learnt = True
                    elif (size - 16) % 8:
                        # a size no stand-in class can have: give up on this type
                        result.outcome = f"stopped at {s['mod']}.{s['cls']} (expected size {size})"
                        break
                for rx in (_NOT_TYPE, _NO_ATTR):
                    t = rx.search(msg)
                    if t and t["mod"] in state and t["cls"] not in state[t["mod"]]["types"]:
                        state[t["mod"]]["types"][t["cls"]] = 16
                        learnt = True
                if not learnt:
                    result.outcome = f"imports checked; the module body then failed: {errors[-1]['type']}: {msg[:200]}"
                    result.complete = True
                    break
            else:
                result.outcome = "imports checked; stopped at the first C call" if any(
                    e["event"] == "called" for e in events) else "imported"
                result.complete = True
                break
    result.seconds = time.perf_counter() - started
    return result


_EVENT_FIELDS = {"lookup": ("module", "name"), "attr": ("module", "name"), "error": ("message", "type"), "called": (), "imported": ()}


def _read_events(log_file: str) -> list[dict[str, str]] | None:
    """The child's events, or None when the log is too long, not a file, or not of their shape.

    The audited module runs in that process and may write to the log too:
    the file is read up to the output budget and every line is checked.
    """
    data = read_regular(log_file, MAX_OUTPUT + 1)  # it may have been replaced by a FIFO, too
    if data is None or len(data) > MAX_OUTPUT:
        return None
    events = []
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError:
            return None
        fields = _EVENT_FIELDS.get(e.get("event")) if isinstance(e, dict) and isinstance(e.get("event"), str) else None
        if fields is None or not all(isinstance(e.get(k), str) for k in fields):
            return None
        events.append(e)
    return events


def probe_request(*, timeout: float, python: str, module: str, path: str, providers: dict[str, dict]) -> tuple[ProbeResult, list[ProbeRecord]]:
    """The ``capi`` probe (through :class:`cuaudit.probe.Prober`): one consumer module."""
    result = probe_consumer(python, module, path, providers, timeout=timeout)
    record = ProbeRecord(
        what=f"import {module} against stand-in providers ({', '.join(sorted(providers))})",
        command=f"{python} -S <probe> {path}",
        seconds=round(result.seconds, 3),
        outcome=f"{result.outcome} ({result.runs} runs)",
    )
    return result, [record]

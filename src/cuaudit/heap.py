"""The cyclic collector's policy for an audit: what lives long is never walked again.

An audit holds millions of long-lived facts (frozen dataclasses of tuples and
strings: no cycles) while parsing makes millions of short-lived AST nodes.  With
the default settings every full collection walks the facts again.  Both
measures are here so that the whole policy reads in one place:
``gc_paused`` while facts are unpickled (then frozen), ``fewer_full_collections``
while extracting and running rules, and no collection at all while the command
starts (``pause_for_startup``: imports, the parser, the configuration).

And what is freed goes back to the system: ``give_back_free_memory`` after each
family of rules and before the cache's bundles are written (a large audit only).
"""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Any, Iterator


#: whether the collector is off for start-up (see pause_for_startup)
_starting = False


def pause_for_startup() -> None:
    """No cyclic collection while the command starts, until an audit's first heavy phase.

    Start-up allocates what lives as long as the process (modules, classes, dataclass
    methods, the parser): the young collections that walked it again and again were
    9 ms of a 140 ms check of a small wheel.  The first :func:`gc_paused` or
    :func:`fewer_full_collections`, or :func:`end_startup`, turns the collector back on.
    """
    global _starting
    if gc.isenabled():
        gc.disable()
        _starting = True


def end_startup() -> None:
    """The collector back on, if :func:`pause_for_startup` turned it off (once: later phases keep their own policy)."""
    global _starting
    if _starting:
        _starting = False
        # what start-up built lives on: frozen, no collection walks it (the first one after
        # the pause otherwise walked all of it, 30 ms)
        gc.freeze()
        gc.enable()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a block builds many objects that live on (unpickled facts).

    Facts are frozen dataclasses of tuples and strings: refcounting frees them, and
    no cycle is made while they are read.  With the collector on, each collection
    walked the growing heap again: unpickling the 133 fact bundles of an
    88-distribution environment took 29 s, 4.8 s without (accuracy-venv).
    """
    end_startup()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # what was built lives on: frozen, the next collections do not walk it (they would, three
        # generations deep, as soon as the collector is back: 3 s of 17 after the 88 bundles above)
        gc.freeze()
        if enabled:
            gc.enable()


@contextlib.contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Collect cycles among young objects only, for the duration of an audit.

    Parsing builds millions of short-lived AST nodes while the facts gathered
    so far stay alive: with the default thresholds the collector traverses
    everything alive again and again (a cold check of numpy 2.0.2 spent 4 of its
    10.7 s CPU there, cupy 14.2.0 about 1.9 of 7.8 s).  Trees are freed by
    reference counting; the few cycles made are young and still collected.

    The young generation is collected every 100,000 allocations, not 10,000: each of those
    collections walks the parse trees still alive (acyclic, freed by reference counting);
    extracting torch 2.8.0's 2,075 sources spent 1.6 of its 17 s of worker CPU collecting,
    0.25 s with these thresholds (forked workers inherit them).
    """
    end_startup()
    saved = gc.get_threshold()
    gc.set_threshold(max(saved[0], 100_000), max(saved[1], 20), max(saved[2], 1_000_000))
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def give_back_free_memory(*, always: bool = False) -> None:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``; elsewhere nothing).

    What a family of rules built and let go (the package model of an environment, the import-time
    programs it decoded) sits in freed heap pages the allocator keeps: the resident memory of the
    process never goes down, and the facts read afterwards only add to it.  Handing those pages
    back after each family makes room for the rest of the audit (see ``RuleContext.release``).

    ``always``: whatever the process's size (a worker after each chunk: see ``workers.extract_forked``).
    """
    global _trim
    if not always and _resident_kb() < _TRIM_FROM_KB:
        return  # a small audit (one wheel's check) has nothing worth a trim, nor ctypes' import (2-3 ms)
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                # the process's own symbols: glibc's when it is the C library (musl has no malloc_trim)
                _trim = getattr(ctypes.CDLL(None), "malloc_trim", False)
            except (OSError, ImportError):
                _trim = False
    if _trim:
        _trim(0)


#: glibc's malloc_trim once looked up (False: none here)
_trim: "Any" = None
#: the resident size (KB) from which a process gives its free heap pages back
_TRIM_FROM_KB = 256 * 1024


def _resident_kb() -> int:
    """This process's resident size now (Linux ``/proc``; 0 elsewhere).  Not ``ru_maxrss``: a
    process started by a large one inherits its peak across the fork and exec."""
    import os

    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        return 0

"""The collector's policy for an audit (heap.py): young collections are rare, and nothing is left changed."""

from __future__ import annotations

import gc

from cuaudit.heap import fewer_full_collections


def test_young_generation_is_collected_every_100k_allocations_and_restored() -> None:
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with fewer_full_collections():
            # parse trees are acyclic: collecting every 10,000 allocations walked them again and again
            assert gc.get_threshold() == (100_000, 20, 1_000_000)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(500_000, 50, 2_000_000)
        with fewer_full_collections():  # a policy already laxer is kept
            assert gc.get_threshold() == (500_000, 50, 2_000_000)
    finally:
        gc.set_threshold(*saved)


def test_cycles_made_during_an_audit_are_still_collected_without_asking() -> None:
    import weakref

    class Node:
        pass

    assert gc.isenabled()
    with fewer_full_collections():
        gc.collect()
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        assert ref() is not None  # a cycle: reference counting alone never frees it
        keep = [[None] for _ in range(150_000)]  # past the young threshold: a collection runs
        assert ref() is None
        del keep


def test_freed_heap_pages_go_back_to_the_system() -> None:
    # 200 MB in blocks under glibc's mmap threshold, freed below a block that pins the heap's top:
    # the process stays that large until the free pages are handed back
    import ctypes
    import sys

    import pytest

    from cuaudit.heap import give_back_free_memory

    if not sys.platform.startswith("linux"):
        pytest.skip("malloc_trim is glibc's (Linux)")
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "malloc_trim"):
        pytest.skip("not glibc: no malloc_trim")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

    def resident_mb() -> float:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096 / 2**20

    blocks = [libc.malloc(64 * 1024) for _ in range(4800)]  # 300 MB: past the size a trim waits for
    for b in blocks:
        libc.memset(b, 1, 64 * 1024)
    pin = libc.malloc(64 * 1024)
    for b in blocks:
        libc.free(b)
    held = resident_mb()
    give_back_free_memory()  # the process peaked past _TRIM_FROM_KB (256 MB) above
    assert held - resident_mb() > 150
    libc.free(pin)


def test_a_small_process_gives_nothing_back_and_imports_nothing_for_it() -> None:
    # a one-wheel check calls it after each family of rules: no ctypes import, no trim
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys; from cuaudit.heap import give_back_free_memory; give_back_free_memory(); "
            "print('ctypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "False"

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

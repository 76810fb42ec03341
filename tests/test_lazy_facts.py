"""Facts decoded when read (``Extractor.decoded_lazily``, ``engine.Facts``) and the collector
paused while facts are unpickled (``heap.gc_paused``): speed work that must not change a fact."""

from __future__ import annotations

import gc
import pickle

from conftest import make_tree

from cuaudit.config import Config
from cuaudit.engine import Facts, Pickled, gather
from cuaudit.heap import gc_paused

#: modules with imports, calls and functions: the import-time program and python_source have work
FILES = {
    f"pkg/mod{i}.py": f"import os\nfrom . import mod{(i + 1) % 70}\n\ndef f{i}(x):\n    return os.path.join(x, '{i}')\n"
    for i in range(70)  # more than one chunk of 64 members: extracted by forked workers
}
FILES["pkg/__init__.py"] = "from . import mod0\n"
LAZY = ("import_time", "python_source")


def _facts(tree, config: Config) -> tuple[dict, Facts]:
    got = gather([str(tree)], config=config, extractors=LAZY)
    got.extraction.store.close()
    raw = got.extraction.facts
    return {k: raw.get(k) for k in list(raw.keys())}, raw


def test_facts_decode_a_pickled_value_once_when_read():
    value = {"a": (1, 2)}
    facts = Facts({("k",): Pickled(pickle.dumps(value)), ("plain",): 3})
    assert dict.__getitem__(facts, ("k",)) == pickle.dumps(value)  # not decoded yet
    first = facts.get(("k",))
    assert first == value and facts[("k",)] is first  # decoded once, then kept
    assert facts.get(("missing",)) is None and facts.get(("missing",), 5) == 5
    assert dict(facts.items()) == {("k",): value, ("plain",): 3} and sorted(map(str, facts.values())) == ["3", str(value)]


def test_cached_and_parallel_facts_equal_uncached_ones_and_stay_pickled_until_read(tmp_path):
    tree = make_tree(tmp_path / "t", FILES)
    uncached, _ = _facts(tree, Config(cache=False, jobs=1))
    assert any(k[2] == "import_time" for k in uncached) and any(k[2] == "python_source" for k in uncached)
    config = Config(cache=True, cache_dir=str(tmp_path / "cache"), jobs=2)
    got = gather([str(tree)], config=config, extractors=LAZY)
    got.extraction.store.close()
    # forked workers send the lazy facts as their pickle: the parent stores them undecoded
    assert all(type(dict.__getitem__(got.extraction.facts, k)) is Pickled for k in uncached)
    cold = {k: got.extraction.facts.get(k) for k in list(got.extraction.facts.keys())}
    warm_decoded, _ = _facts(tree, config)
    warm_raw = gather([str(tree)], config=config, extractors=LAZY).extraction.facts
    assert cold == uncached and warm_decoded == uncached
    # read from the cache's bundle: still pickled until a rule asks
    pickled = [k for k in warm_raw.keys() if type(dict.__getitem__(warm_raw, k)) is Pickled]
    assert {k[2] for k in pickled} == set(LAZY) and len(pickled) == len(uncached)


def test_gc_paused_restores_the_collector_and_freezes_what_was_built():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() >= 1000
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()
        gc.unfreeze()
    assert kept

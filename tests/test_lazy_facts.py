"""Facts kept pickled until read (``workers.Pickled``, ``extraction.Facts``) and the collector
paused while facts are unpickled (``heap.gc_paused``): speed work that must not change a fact."""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest

from conftest import make_installed, make_tree

from cuaudit.config import Config
from cuaudit.engine import gather
from cuaudit.extraction import Facts
from cuaudit.workers import Pickled
from cuaudit.heap import gc_paused
from cuaudit.inputs.environment import InstalledDistribution

#: modules with imports, calls and functions: the import-time program and python_source have work
FILES = {
    f"pkg/mod{i}.py": f"import os\nfrom . import mod{(i + 1) % 70}\n\ndef f{i}(x):\n    return os.path.join(x, '{i}')\n"
    for i in range(70)  # more than one chunk of 64 members: extracted by forked workers
}
FILES["pkg/__init__.py"] = "from . import mod0\n"
LAZY = ("import_time", "python_source")


def _fresh(dist: InstalledDistribution) -> InstalledDistribution:
    return InstalledDistribution(None, dist.ref.name, dist.ref.version, dist.meta_dir)


def _facts(dist, config: Config) -> tuple[dict, Facts]:
    got = gather([_fresh(dist)], config=config, extractors=LAZY)
    raw = got.extraction.facts
    facts = {k: raw.get(k) for k in list(raw.keys())}
    got.extraction.close()
    return facts, raw


def test_facts_decode_a_pickled_value_once_when_read():
    value = {"a": (1, 2)}
    facts = Facts({("k",): Pickled(pickle.dumps(value)), ("plain",): 3})
    assert dict.__getitem__(facts, ("k",)) == pickle.dumps(value)  # not decoded yet
    first = facts.get(("k",))
    assert first == value and facts[("k",)] is first  # decoded once, then kept
    assert facts.get(("missing",)) is None and facts.get(("missing",), 5) == 5
    assert dict(facts.items()) == {("k",): value, ("plain",): 3} and sorted(map(str, facts.values())) == ["3", str(value)]


def test_cached_and_parallel_facts_equal_uncached_ones_and_stay_pickled_until_read(tmp_path):
    # installed: on-demand facts wait to be read (extraction._reads_on_demand)
    tree = make_installed(tmp_path / "site", "pkg", FILES)
    uncached, _ = _facts(tree, Config(cache=False, jobs=1))
    assert any(k[2] == "import_time" for k in uncached) and any(k[2] == "python_source" for k in uncached)
    config = Config(cache=True, cache_dir=str(tmp_path / "cache"), jobs=2)
    got = gather([_fresh(tree)], config=config, extractors=LAZY)
    # on-demand facts: nothing extracted until read, then a batch in the forked workers
    assert got.extraction.extracted == 0 and set(got.extraction.facts.pending) >= set(uncached)
    got.extraction.facts.prefetch(list(got.extraction.facts.pending))
    assert got.extraction.extracted >= len(uncached) and not got.extraction.facts.pending
    # forked workers send the lazy facts as their pickle: the parent stores them undecoded
    assert all(type(dict.__getitem__(got.extraction.facts, k)) is Pickled for k in uncached)
    cold = {k: got.extraction.facts.get(k) for k in list(got.extraction.facts.keys())}
    got.extraction.close()  # writes the audited tree's open bundle of on-demand facts
    warm_decoded, _ = _facts(tree, config)
    warm = gather([_fresh(tree)], config=config, extractors=LAZY).extraction
    warm_raw = warm.facts
    warm_raw.prefetch(list(warm_raw.pending))
    assert cold == uncached and warm_decoded == uncached
    assert warm.extracted == 0 and warm.cached >= len(uncached)  # all from the open bundle
    # read from the cache's bundle: still pickled until a rule asks
    pickled = [k for k in warm_raw.keys() if type(dict.__getitem__(warm_raw, k)) is Pickled]
    assert {k[2] for k in pickled} == set(LAZY) and len(pickled) == len(uncached)


def test_every_fact_from_the_workers_and_the_cache_stays_pickled_until_read(tmp_path):
    # facts extracted up front (a tree's module imports and CU4xx facts), not only the on-demand ones:
    # the pool's thread hands the parent bytes, and the cache stores them without pickling again
    tree = make_tree(tmp_path / "t", FILES)
    up_front = ("module_imports", "promotion_source")
    serial = gather([str(tree)], config=Config(cache=False, jobs=1), extractors=up_front).extraction
    expected = {k: serial.facts.get(k) for k in list(serial.facts.keys())}
    serial.close()
    assert {k[2] for k in expected} == set(up_front) and len(expected) >= len(FILES)
    config = Config(cache=True, cache_dir=str(tmp_path / "cache"), jobs=2)
    for run in ("cold, in forked workers", "from the cache"):
        got = gather([str(tree)], config=config, extractors=up_front).extraction
        raw = got.facts
        kept = {k: dict.__getitem__(raw, k) for k in list(raw.keys())}
        assert all(type(v) is Pickled for v in kept.values()), run  # nothing decoded yet
        assert {k: raw.get(k) for k in kept} == expected, run  # and each decodes to the same fact
        assert (got.extracted, got.cached) == ((len(expected), 0) if run.startswith("cold") else (0, len(expected))), run
        got.close()


def test_a_fact_that_does_not_pickle_is_kept_as_it_is():
    from cuaudit.workers import as_pickle

    class Odd:
        def __reduce__(self):
            raise TypeError("no")

    odd = Odd()
    assert as_pickle(odd) is odd and as_pickle(None) is None
    kept = as_pickle({"a": 1})
    assert type(kept) is Pickled and as_pickle(kept) is kept and pickle.loads(kept) == {"a": 1}


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


def _state(obj) -> dict:
    """What pickle stores for ``obj`` (``object.__getstate__`` exists only from Python 3.11)."""
    return obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)[2]


def test_import_time_facts_are_pickled_without_their_default_fields():
    from cuaudit.facts.import_time import Condition, Effect, FunctionBody, parse_import_time

    prog = parse_import_time("import os\nif os.name == 'nt':\n    from . import win\n"
                             "try:\n    import fast\nexcept ImportError:\n    fast = None\n"
                             "def f(x=0):\n    g('a', key='b')\n")
    cond = next(e for e in prog.effects if e.conditions).conditions[0]
    effect = Effect("bind", 3, bound="x")
    # only what differs from the defaults is stored; the class answers for the rest
    assert _state(effect) == {"kind": "bind", "line": 3, "bound": "x"}
    assert set(_state(cond)) <= {"expr", "truth", "line", "try_imports", "try_line"}
    assert _state(FunctionBody("f", 1, ())) == {"name": "f", "line": 1, "effects": ()}
    # a value equal to its default but of another type is kept (False is not the level 0)
    assert _state(Effect("import", 1, level=False))["level"] is False
    for value in (prog, effect, cond, Condition("x", True, 1)):
        back = pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == value and repr(back) == repr(value) and hash(back) == hash(value)
    every_field = [{f.name: getattr(e, f.name) for f in dataclasses.fields(e)} for e in prog.effects]
    assert len(pickle.dumps(prog.effects)) < len(pickle.dumps(every_field))
    # the instance holds only that much from the start: its dict is the state as it is
    assert vars(Effect("call", 2, callee="g", args=("a",))) == {"kind": "call", "line": 2, "callee": "g", "args": ("a",)}
    assert Effect("call", 2, (), (), "", "", 0, "", "g") == Effect("call", 2, callee="g")
    assert dataclasses.replace(effect, module="m") == Effect("bind", 3, module="m", bound="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        effect.line = 4  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(effect))
    assert back.module == "" and back.args == () and back.conditions == () and vars(back) == _state(effect)


def test_rule_context_has_fact_leaves_a_pickled_fact_undecoded():
    from types import SimpleNamespace

    from cuaudit.context import RuleContext

    art = SimpleNamespace(members=())
    facts = Facts({(0, "a.py", "import_time"): Pickled(pickle.dumps({"x": 1}))})
    ctx = RuleContext(Config(), [art], facts, None, [])
    assert ctx.has_fact("import_time", art, "a.py") and not ctx.has_fact("python_source", art, "a.py")
    assert type(dict.__getitem__(facts, (0, "a.py", "import_time"))) is Pickled  # still its pickle
    assert ctx.fact("import_time", art, "a.py") == {"x": 1}


def test_without_a_cache_no_fact_is_pickled_for_a_bundle(tmp_path, monkeypatch):
    """--no-cache keeps nothing, so nothing is pickled to be kept (a torch check spent 1.4 s so)."""
    from cuaudit import workers
    from conftest import make_tree

    tree = make_tree(tmp_path / "t", FILES)
    pickled: list[str] = []
    real = workers.as_pickle
    monkeypatch.setattr(workers, "as_pickle", lambda value: pickled.append(type(value).__name__) or real(value))
    gather([str(tree)], config=Config(cache=False, jobs=1), extractors=LAZY).extraction.close()
    assert pickled == []
    # the same audit with a cache pickles its bundle: the spy sees what the first run did not do
    gather([str(tree)], config=Config(cache=True, cache_dir=str(tmp_path / "c"), jobs=1), extractors=LAZY).extraction.close()
    assert len(pickled) >= len(FILES)


def test_a_program_decodes_its_function_bodies_only_when_they_are_read():
    import ast

    from cuaudit.facts.import_time import _Reader

    source = ("import os\nsetup(lextab='generic_lextab')\n\ndef helper(x):\n    import json\n    return register(name='plugin_a')\n\n"
              "class Loader:\n    def load(self):\n        from . import sub\n")
    prog = _Reader().run(ast.parse(source))
    back = pickle.loads(pickle.dumps(prog, protocol=pickle.HIGHEST_PROTOCOL))
    assert "functions" not in vars(back)  # the bodies are still a pickle
    assert back.function("missing") is None and back.function("os") is None
    assert back.keyword_calls() == prog.keyword_calls()
    assert [e.kwargs for e in back.keyword_calls()] == [(("lextab", "generic_lextab"),), (("name", "plugin_a"),)]
    assert "functions" not in vars(back)  # neither a name that is no function nor the calls decoded them
    assert back.function("helper") == prog.function("helper") and "functions" in vars(back)
    assert back == prog and repr(back) == repr(prog)
    again = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(prog)), protocol=pickle.HIGHEST_PROTOCOL))
    assert again.functions == prog.functions  # re-pickled before its bodies were read: the same bodies


@dataclasses.dataclass(frozen=True)
class _Program:
    """A fact that can be watched (a weakref) once decoded."""

    names: tuple[str, ...]


def test_released_facts_are_let_go_and_decoded_again_when_read():
    import weakref

    facts = Facts()
    facts.keeps_pickles = True  # the open bundles hold the pickles (a cache): releasing costs nothing
    key = (0, "pkg/mod.py", "import_time")
    facts[key] = Pickled(pickle.dumps(_Program(("os",))))
    first = facts.get(key)
    watched = weakref.ref(first)
    assert facts.get(key) is first  # decoded once while it is held
    del first
    facts.release(["python_source"])
    assert watched() is not None  # another extractor's release keeps it
    facts.release(["import_time"])
    assert watched() is None  # no reader holds it: freed, not kept by the facts
    again = facts.get(key)
    assert again == _Program(("os",)) and type(dict.get(facts, key)) is _Program


def test_without_pickles_kept_release_keeps_the_decoded_fact():
    facts = Facts()  # --no-cache: no bundle holds the pickle, releasing would cost a copy
    key = (0, "pkg/mod.py", "import_time")
    facts[key] = Pickled(pickle.dumps(_Program(("os",))))
    first = facts.get(key)
    facts.release(["import_time"])
    assert dict.get(facts, key) is first


class _Model:
    def __init__(self) -> None:
        self.parts = [self]  # a cycle: refcounting alone never frees it
        self.released = False

    def release(self) -> None:
        self.released = True
        self.parts.clear()


def test_rule_context_releases_a_family_s_models_once_it_has_run():
    import weakref

    from cuaudit.context import RuleContext

    ctx = RuleContext(Config(), [], Facts(), None, [])
    ctx.family = "rules.a"
    model = ctx.memo("a.model", _Model)
    plain = ctx.memo("a.plain", dict)  # a memo without release(): dropped all the same
    ctx.family = "rules.b"
    kept = ctx.memo("b.model", _Model)
    watched = weakref.ref(model)
    ctx.release("rules.a", [])
    assert model.released and not kept.released
    gc.disable()
    try:
        del model
        assert watched() is None  # freed by refcounting, its cycle broken by release()
    finally:
        gc.enable()
    assert ctx.memo("b.model", _Model) is kept
    # asked again after release: computed again, never the released one
    assert not ctx.memo("a.model", _Model).released
    assert ctx.memo("a.plain", dict) is not plain


def test_module_universe_release_breaks_its_cycles():
    import weakref

    from cuaudit.analysis.module_tree import ModuleUniverse

    uni = ModuleUniverse()
    model = weakref.ref(uni.model)
    watched = weakref.ref(uni)
    uni.release()
    gc.disable()  # freed by refcounting alone, as in an audit (what it holds is frozen: heap.py)
    try:
        del uni
        assert watched() is None and model() is None
    finally:
        gc.enable()

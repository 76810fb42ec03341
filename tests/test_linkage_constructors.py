"""CU201's distinct verdict for a library needed for its constructors (issue 12).

torch's umbrella ``libtorch.so`` uses no symbol of ``libtorch_cuda.so``: it
exists to load it, so that the CUDA kernels register from its static
constructors.  That entry is no over-linking and ``repair`` must keep it.
"""

from __future__ import annotations

from cuaudit import audit
from cuaudit.config import Config
from conftest import compile_so, make_tree


def test_umbrella_needing_a_library_with_constructors(tmp_path):
    d = tmp_path / "tree" / "pkg" / "lib"
    d.mkdir(parents=True)
    compile_so(d, "libkernels.so", "static int n; __attribute__((constructor)) static void reg(void) { n = 1; }\n"
               "int kernels_count(void) { return n; }\n", flags=["-Wl,-soname,libkernels.so"])
    compile_so(d, "libplain.so", "int plain_fn(void) { return 2; }\n", flags=["-Wl,-soname,libplain.so"])
    # the umbrella: its own code uses nothing of what it loads
    compile_so(d, "libumbrella.so", "int umbrella_version(void) { return 1; }\n",
               flags=["-Wl,--no-as-needed", f"-L{d}", "-Wl,-rpath,$ORIGIN", "-Wl,-soname,libumbrella.so"],
               libs=["kernels"])
    # an ordinary over-linked module: it uses libplain but needs libkernels for nothing
    compile_so(d, "libuser.so", "int plain_fn(void); int user(void) { return plain_fn(); }\n",
               flags=["-Wl,--no-as-needed", f"-L{d}", "-Wl,-rpath,$ORIGIN", "-Wl,-soname,libuser.so"],
               libs=["plain", "kernels"])
    make_tree(tmp_path / "tree", {"pkg/__init__.py": ""})
    report = audit([str(tmp_path / "tree")], config=Config(cache=False, select=("CU201",)))
    got = {(f.location.member, f.key): f for f in report.findings}
    umbrella = got[("pkg/lib/libumbrella.so", "libkernels.so")]
    assert umbrella.evidence["verdict"] == "constructors" and umbrella.evidence["init_array_entries"] >= 1
    assert "constructors" in umbrella.message and umbrella.severity.name == "INFO"
    user = got[("pkg/lib/libuser.so", "libkernels.so")]
    assert "verdict" not in user.evidence  # it uses another library: plain over-linking

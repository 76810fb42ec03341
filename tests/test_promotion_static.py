"""CU401-CU405: static NEP 50 findings on sources written here (nothing is run)."""

from __future__ import annotations

import textwrap

import pytest

from cuaudit import audit
from cuaudit.config import Config
from cuaudit.facts.promotion import analyse_source, promote
from cuaudit.model import Applicability, Severity
from cuaudit.repair.source import apply_fixes

SEED = """\
import cupy


@cupy.fuse()
def f(mu, dt, delta_phi):
    return 1 + mu * dt * delta_phi
"""


def run(tree_factory, files: dict[str, str], select: str = "CU4"):
    root = tree_factory({k: textwrap.dedent(v) for k, v in files.items()})
    return audit([str(root)], config=Config(cache=False, select=(select,)))


def by_code(report, code):
    return [f for f in report.findings if f.code == code]


def test_seed_kernel_flagged_without_versions_is_a_warning(tree_factory):
    report = run(tree_factory, {"app.py": SEED})
    [f] = by_code(report, "CU401")
    assert (f.location.member, f.location.line, f.location.column) == ("app.py", 6, 12)
    assert f.location.symbol == "f"
    assert f.severity is Severity.WARNING
    assert "no CuPy version is known" in f.message
    assert f.fix.applicability is Applicability.UNSAFE
    assert f.fix.edits[0].content == "delta_phi.dtype.type(1)"


@pytest.mark.parametrize(
    "requirements, severity",
    [
        # CU401 is a warning at most: the crash was reported, and on an H100 CuPy 13.3.0 recovered from it
        ('["cupy-cuda12x==13.3.0", "numpy>=2"]', Severity.WARNING),
        ('["cupy-cuda12x>=13.0"]', Severity.WARNING),  # numpy unconstrained: NumPy 2 admitted
        ('["cupy-cuda12x>=13.4.1", "numpy>=2"]', Severity.INFO),
        ('["cupy-cuda12x==13.3.0", "numpy<2"]', Severity.INFO),
        ('["cupy-cuda11x<13"]', Severity.INFO),
    ],
)
def test_declared_requirements_decide_the_severity(tree_factory, requirements, severity):
    pyproject = f'[project]\nname = "app"\nversion = "1"\ndependencies = {requirements}\n'
    report = run(tree_factory, {"app.py": SEED, "pyproject.toml": pyproject})
    [f] = by_code(report, "CU401")
    assert f.severity is severity, f.message
    assert "pyproject.toml" in f.message


def test_requirements_txt_is_read_too(tree_factory):
    report = run(tree_factory, {"app.py": SEED, "requirements.txt": "cupy-cuda12x==13.2.0  # pinned\nnumpy==2.0.2\n"})
    [f] = by_code(report, "CU401")
    assert f.severity is Severity.WARNING and "requirements.txt" in f.message


@pytest.mark.parametrize(
    "source",
    [
        "import cupy as cp\n@cp.fuse()\ndef k(x):\n    return x * 2\n",
        "from cupy import fuse\n@fuse\ndef k(x):\n    return x * 2\n",
        "from cupy import fuse as F\n@F(kernel_name='k')\ndef k(x):\n    return x * 2\n",
        "import cupy\ndef k(x):\n    return x * 2\nkk = cupy.fuse(k)\n",
        "import cupy\ndef k(x):\n    return x * 2\nkk = cupy.fuse(kernel_name='kk')(k)\n",
        "import cupy as cp\nTWO = 2\n@cp.fuse()\ndef k(x):\n    return x * TWO\n",
        "import cupy as cp\n@cp.fuse()\ndef k(x):\n    two = 2\n    return x * two\n",
        "import cupy as cp\n@cp.fuse()\ndef k(x):\n    return cp.maximum(x, 2)\n",
        "import cupy as cp\n@cp.fuse()\ndef k(x):\n    return cp.where(x > 2, x, 0)\n",
        "import cupy as cp, math\n@cp.fuse()\ndef k(x):\n    return x * math.pi\n",
    ],
)
def test_fuse_spellings_and_scalar_forms(source):
    facts = analyse_source(source)
    assert facts.fused, source
    assert all(s.kernel == "k" for s in facts.fused)


@pytest.mark.parametrize(
    "source",
    [
        # not a fused kernel
        "import cupy as cp\ndef k(x):\n    return 1 + x\n",
        # a fuse from elsewhere
        "import mylib\n@mylib.fuse()\ndef k(x):\n    return 1 + x\n",
        # scalars only: plain Python arithmetic, no ufunc runs
        "import cupy as cp\n@cp.fuse()\ndef k(x):\n    n = 2 * 3\n    return x\n",
        # the name is a parameter (a kernel argument), or rebound
        "import cupy as cp\nTWO = 2\n@cp.fuse()\ndef k(x, TWO):\n    return x * TWO\n",
        "import cupy as cp\nA = 2\nA = cp.ones(3)\n@cp.fuse()\ndef k(x):\n    return x * A\n",
        # already cast explicitly
        "import cupy as cp\n@cp.fuse()\ndef k(x):\n    return x * x.dtype.type(2)\n",
    ],
)
def test_fuse_no_false_positives(source):
    assert analyse_source(source).fused == ()


def test_fuse_fix_rewrites_the_file(tree_factory):
    root = tree_factory({"app.py": SEED})
    report = audit([str(root)], config=Config(cache=False, select=("CU401",)))
    result = apply_fixes(report, unsafe=True, write=True)
    assert (root / "app.py").read_text().splitlines()[-1] == "    return delta_phi.dtype.type(1) + mu * dt * delta_phi"
    assert result.files and not apply_fixes(report, unsafe=False, write=False).files
    compile((root / "app.py").read_text(), "app.py", "exec")


def test_can_cast_with_python_scalar(tree_factory):
    report = run(tree_factory, {"m.py": """\
        import numpy as np
        import cupy
        from numpy import can_cast
        LIMIT = 300
        a = np.can_cast(300, np.uint8)
        b = can_cast(-1.5, "f4")
        c = cupy.can_cast(LIMIT, cupy.uint8)
        d = np.can_cast(np.uint16, np.uint8)
        e = np.can_cast(np.zeros(3).dtype, np.float32)
        """})
    found = by_code(report, "CU402")
    assert [f.location.line for f in found] == [5, 6, 7]
    assert found[0].evidence["argument"] == "300"
    assert all(f.severity is Severity.WARNING for f in found)  # no NumPy version known


SNIPPET = """\
import numpy as np
a = np.array([100], dtype=np.uint8)
b = a + 300
c = a == 300
d = a < 1000
e = np.array([1.], np.float32) * np.float64(3)
f = np.zeros(3, dtype="float16") + 70000.0
g = np.float32(0.1) * 3.0
h = np.uint8(300)
a += 300
k = np.ones(3, np.float32) * 2.0
l = np.ones(3, np.float32) * np.float32(2)
m = np.ones(3).astype("int8") - 129
n = np.array([1, 300], dtype=np.uint8)
o = a / 300
"""


def test_known_dtype_changes():
    facts = analyse_source(SNIPPET)
    got = [(c.kind, c.span.line) for c in facts.changed]
    assert got == [
        ("int-out-of-bounds", 3),
        ("numpy-scalar-upcast", 6),
        ("python-scalar-narrowed", 7),
        ("python-scalar-narrowed", 8),
        ("int-out-of-bounds", 9),
        ("int-out-of-bounds", 10),
        ("int-out-of-bounds", 13),
        ("int-out-of-bounds", 14),
    ]
    first = facts.changed[0]
    assert first.legacy == "uint16 result" and first.new.startswith("OverflowError")


def test_numpy_bound_in_pyproject_demotes_to_info(tree_factory):
    report = run(tree_factory, {"m.py": SNIPPET, "pyproject.toml": '[project]\nname="m"\nversion="1"\ndependencies=["numpy<2"]\n'})
    assert report.findings and all(f.severity is Severity.INFO for f in report.findings)
    assert {f.code for f in report.findings} == {"CU403", "CU404", "CU405"}


def test_numpy_scalar_fix_restores_the_array_dtype(tree_factory):
    root = tree_factory({"m.py": SNIPPET})
    report = audit([str(root)], config=Config(cache=False, select=("CU404",)))
    apply_fixes(report, unsafe=True, write=True)
    assert "e = np.array([1.], np.float32) * 3.0" in (root / "m.py").read_text()


def test_comparisons_are_never_reported():
    ops = ["==", "!=", "<", "<=", ">", ">="]
    lines = ["import numpy as np", "a = np.ones(3, dtype=np.uint8)", "s = np.float32(1)"]
    lines += [f"r{i} = a {op} 300" for i, op in enumerate(ops)]
    lines += [f"q{i} = s {op} 1e300" for i, op in enumerate(ops)]
    lines += [f"p{i} = a {op} np.int64(3)" for i, op in enumerate(ops)]
    assert analyse_source("\n".join(lines) + "\n").changed == ()


def test_promote_matches_numpy():
    np = pytest.importorskip("numpy")
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "complex64", "complex128"]
    for a in names:
        for b in names:
            assert promote(a, b) == str(np.promote_types(a, b)), (a, b)


def test_syntax_error_is_cu006(tree_factory):
    report = run(tree_factory, {"bad.py": "import numpy\ndef (:\n"}, select="CU")
    assert any(f.code == "CU006" for f in report.findings)


@pytest.mark.parametrize("requires, severity", [(["cupy-cuda12x==13.3.0", "numpy>=2"], Severity.WARNING),
                                                (["cupy-cuda12x>=13.4.1"], Severity.INFO)])
def test_wheel_requires_dist_decides_the_severity(wheel_factory, requires, severity):
    whl = wheel_factory("kern", "1.0", {"kern/__init__.py": SEED}, requires=requires)
    report = audit([str(whl)], config=Config(cache=False, select=("CU401",)))
    [f] = report.findings
    assert f.severity is severity and "METADATA" in f.message


def test_installed_distributions_get_only_the_crash_rules(tmp_path):
    """Inside site-packages only CU401/CU402 are looked for (library internals are not the user's)."""
    from cuaudit.inputs.environment import InstalledDistribution

    site = tmp_path / "site"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "__init__.py").write_text(SEED + "import numpy as np\nb = np.ones(2, np.uint8) + 300\n")
    meta = site / "lib-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: lib\nVersion: 1.0\n")
    (meta / "top_level.txt").write_text("lib\n")
    dist = InstalledDistribution(None, "lib", "1.0", str(meta))
    report = audit([dist], config=Config(cache=False, select=("CU4",)))
    assert [(f.code, f.severity) for f in report.findings] == [("CU401", Severity.INFO)]
    assert "no CuPy is installed" in report.findings[0].message


@pytest.mark.parametrize("version, severity", [("13.3.0", Severity.WARNING), ("13.4.1", Severity.INFO), ("12.3.0", Severity.INFO)])
def test_a_cupy_release_is_judged_by_its_own_version(wheel_factory, version, severity):
    whl = wheel_factory("cupy-cuda12x", version, {"cupyx/k.py": SEED}, requires=["numpy>=1.22,<2.3"])
    report = audit([str(whl)], config=Config(cache=False, select=("CU401",)))
    [f] = report.findings
    assert f.severity is severity and f"cupy-cuda12x {version} itself" in f.message


COPYTO = """\
import cupy as cp
out = cp.empty(3)
cp.copyto(out, 0.5)
cp.copyto(out, src=-1)
cp.copyto(out, cp.zeros(3))
r = cp.select([out > 0], [out])
r2 = cp.select([out > 0], [out], cp.nan)
r3 = cp.select([out > 0], [out], default=cp.zeros(3))
"""


@pytest.mark.parametrize("cupy_req, severity", [("cupy-cuda12x==13.2.0", Severity.ERROR),
                                                ("cupy-cuda12x>=13.3.0", Severity.INFO), (None, Severity.WARNING)])
def test_copyto_and_select_with_python_scalars(tree_factory, cupy_req, severity):
    files = {"m.py": COPYTO}
    if cupy_req:
        files["requirements.txt"] = cupy_req + "\n"
    report = run(tree_factory, files, select="CU406")
    assert [(f.location.line, f.evidence["scalar"]) for f in report.findings] == [
        (3, "0.5"), (4, "-1"), (6, "default=0 (implicit)"), (7, "cp.nan")]
    assert {f.severity for f in report.findings} == {severity}


def test_tests_of_installed_distributions_are_not_audited(tmp_path):
    # NumPy's own tests assert the NumPy 2 TypeError of can_cast; they never run on import
    from cuaudit import audit
    from cuaudit.config import Config
    from cuaudit.inputs.environment import InstalledDistribution

    site = tmp_path / "site"
    code = "import numpy as np\nok = np.can_cast(4, np.uint8)\n"
    for rel, text in {"demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
                      "demo-1.0.dist-info/top_level.txt": "demo\n", "demo/__init__.py": "",
                      "demo/core.py": code, "demo/tests/test_core.py": code}.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    dist = InstalledDistribution(None, "demo", "1.0", str(site / "demo-1.0.dist-info"))
    report = audit([dist], config=Config(select=("CU402",), cache=False))
    assert [(f.code, f.location.member) for f in report.findings] == [("CU402", "demo/core.py")]


CALLS = """\
import math
import cupy
import numpy as np

H = 5.0


@cupy.fuse()
def scale(x, h):
    return 1.0 - (x * x) / (h * h)


def plain(x, h):
    return x * h


k = cupy.fuse(plain)
x = cupy.ones(3, dtype=cupy.float32)
a = scale(x, 5.0)
b = scale(x, H)
c = k(x, math.pi)
d = scale(x, np.float32(5.0))
e = plain(x, 5.0)
"""


@pytest.mark.parametrize("requirements, severity", [
    ('["cupy-cuda12x==13.3.0", "numpy>=2"]', Severity.WARNING),
    ('["cupy-cuda12x>=14", "numpy>=2"]', Severity.INFO),
])
def test_python_scalar_arguments_of_fused_kernels(tree_factory, requirements, severity):
    """CU407: what the H100 proved for CuPy 13.3.0 (a Python scalar argument makes the result float64)."""
    pyproject = f'[project]\nname = "app"\nversion = "1"\ndependencies = {requirements}\n'
    report = run(tree_factory, {"app.py": CALLS, "pyproject.toml": pyproject})
    found = by_code(report, "CU407")
    # the NumPy scalar and the call of the plain function are not reported
    assert [(f.location.line, f.evidence["scalar"], f.location.symbol) for f in found] == [
        (19, "5.0", "scale"), (20, "H", "scale"), (21, "math.pi", "k")]
    assert {f.severity for f in found} == {severity}
    assert "types it as float64" in found[0].message and "NumPy 2 and CuPy 14 keep the array's dtype" in found[0].message

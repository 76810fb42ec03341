"""The cython-capi facts of every shared object without a ``PyInit_`` export under the given folders, read
with and without the early exit of ``facts.cython._exports_module_init``: the two must be equal.

    python scripts/device/same_cython_facts.py SITE_PACKAGES...

Prints how many such objects were read, how many differ (each named on stderr) and the time each way.
"""
import sys, os, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'src'))
from cuaudit.facts import cython as C
from cuaudit.formats.elf import image_of_bytes, map_file
roots = sys.argv[1:]
n = early = diff = 0; t_old = t_new = 0.0
for root in roots:
    for d, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith('.so') or (f.startswith('lib') and '.cpython-' not in f and '.abi3.' not in f): continue
            p = os.path.join(d, f)
            if os.path.islink(p) or os.path.getsize(p) < 64: continue
            try:
                with open(p, 'rb') as fh:
                    if fh.read(4) != b'\x7fELF': continue
                elf = image_of_bytes(map_file(p), p)
                if C._exports_module_init(elf): continue
                n += 1
                t = time.perf_counter(); new = C.read_image(elf); t_new += time.perf_counter() - t
                orig = C._exports_module_init
                C._exports_module_init = lambda e: True
                try:
                    elf = image_of_bytes(map_file(p), p)
                    t = time.perf_counter()
                    try: old = C.read_image(elf)
                    except Exception as e: old = repr(e)
                    t_old += time.perf_counter() - t
                finally:
                    C._exports_module_init = orig
                if old != new:
                    diff += 1; print('DIFF', p, old, file=sys.stderr)
            except Exception as e:
                print('ERR', p, e, file=sys.stderr)
print(f'{n} modules without PyInit_, {diff} differ; old {t_old:.2f}s new {t_new:.3f}s')

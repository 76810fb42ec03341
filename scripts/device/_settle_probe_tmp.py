import sys, time, os
T0 = time.time()
sys.path[:0] = ['src', '/tmp/site']
import cuaudit.extraction as ex
real = ex.Extraction.settle
def settle(self, key):
    t = time.time()
    chunk = [s for s in self._sent if key is None or key in s[3]]
    info = []
    for fut, i, ch, held in chunk:
        names = sorted({n for _m, ns in ch for n in ns})
        info.append((len(ch), names, ch[0][0].path, fut.done() if fut is not None else None))
    r = real(self, key)
    dt = time.time() - t
    print(f"SETTLE t={t-T0:.3f} {dt:.3f}s key={key} sent={len(self._sent)} chunk={info}", file=sys.stderr)
    return r
ex.Extraction.settle = settle
real_sl = ex.Extraction._send_later
def sl(self, first=()):
    first = set(first)
    print(f"SEND_LATER first={sorted(first)} later_members={len(self._later)} t={time.time()-T0:.3f}", file=sys.stderr)
    return real_sl(self, first)
ex.Extraction._send_later = sl
sys.argv = ['cuaudit'] + sys.argv[1:]
from cuaudit.cli import entry
entry()

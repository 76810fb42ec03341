"""Doc."""
from __future__ import annotations
import numpy as np
import functools
COUNT = 0
def bump():
    global COUNT
    COUNT += 1
class K:
    n = 1
    n += 1
    def __init__(self):
        self.v = np.arange(4)
    def go(self, k=2 ** 3):
        self.v[1:] += k
        self.v[[0]] *= 3
        return self.v
def gen(n):
    for i in range(n):
        yield i * 2
def outer():
    t = 0
    def inner():
        nonlocal t
        t += 5
        return t
    return inner() + inner()
a = np.ones(5, np.float32)
args = (a, a)
print(np.add(*args).tolist(), np.add(a, a, out=np.empty(5, np.float32)).dtype)
print(np.multiply.reduce(a), functools.reduce(lambda x, y: x * y, [1, 2, 3]))
print([x ** 2 for x in gen(4)], {k: k % 3 for k in range(5)})
bump(); bump(); print(COUNT, K.n, K().go().tolist(), outer())
print(f"{3 + 4} {'%s-%d' % ('a', 2)}", "ab" * 3, [1] + [2], (1,) * 2)
s = "x"; s += "y"; l = [1]; l += [2]; print(s, l)
print((a @ a), -a[0], ~np.int8(3), 7 // 2, 7.0 % 2, 2 ** -1, divmod(7, 2))
print(np.float32(2) ** 2, type(np.float32(2) ** 2).__name__, np.uint8(200) // 3)

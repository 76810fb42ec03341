"""CPU-time budgets for the passes cuaudit runs in its own process over untrusted bytes.

Every read is bounded in bytes (:mod:`cuaudit.inputs.budgets`), but a pass over bytes within those
bounds may still take time that grows faster than they do: a constant-folding product of 2**40
digits held ``cuaudit check`` for ever until the folding learned its bound.  Each extractor's run
on one member therefore has ``ANALYSIS_SECONDS`` of CPU time (:func:`cpu_budget`); past it the
pass is stopped and its member gets a CU004 finding naming the budget, like any other budget, and
the scan goes on.  A budget is a bound, not a timing: real members take a few seconds at most
(the largest, ``libtorch_cuda.so``'s 1 GB, about three), so the default leaves a margin of
twenty for a slow or loaded machine, and no report depends on the machine's speed unless a pass
runs away.  Such a finding is never cached: a faster machine, or a larger budget, may finish it.

The clock is the process's user CPU time (``ITIMER_VIRTUAL``, ``SIGVTALRM``): time spent waiting
for a disk or for other processes does not count.  The budget is kept by the main thread only
(signals are delivered there); a budget opened in another thread is not kept.  A pass running in
:func:`cuaudit.compat.deep`'s thread when its budget ends is stopped there too.  A process that
keeps a budget (each worker, and the main process, a library caller's included) gets this module's
``SIGVTALRM`` handler for good, and its virtual interval timer is this module's while a budget is
open: a program that uses that timer itself should call cuaudit from another thread.

Each rule's check has ``RULE_SECONDS`` the same way (``RuleRun._check``): past them the rule is
CU011 naming the budget, and the later rules of its family do not run on the models it may have
left half built.  Budgets nest: an extraction on demand inside a rule's check keeps its own, and
the one that ends first stops the passes inside it.  :class:`OverTime` is a ``BaseException`` so
that no ``except Exception`` of the pass itself takes it for an error of its own; the budget it
belongs to turns it into the :class:`CPUBudgetExceeded` InputError its caller reports.
"""

from __future__ import annotations

import os
import signal
import threading

from cuaudit.inputs.budgets import budget
from cuaudit.model import InputError

__all__ = ["ANALYSIS_SECONDS", "CPUBudgetExceeded", "OverTime", "RULE_SECONDS", "cpu_budget"]

#: CPU seconds one extractor may spend on one member
ANALYSIS_SECONDS = budget("ANALYSIS_SECONDS")
#: CPU seconds one rule's check may spend in the process that runs it (what it extracts in the
#: workers meanwhile is theirs); past them its family stops (see ``RuleRun._check``)
RULE_SECONDS = budget("RULE_SECONDS")


class OverTime(BaseException):
    """Raised into a pass whose budget (``token``) has run out; turned into CPUBudgetExceeded by it."""

    def __init__(self, token: object) -> None:
        super().__init__("CPU-time budget exceeded")
        self.token = token


class CPUBudgetExceeded(InputError):
    """A pass ran past its CPU-time budget (CU004, evidence ``budget``: never cached)."""


#: the budgets open in this process, outermost first: [token, deadline on the user-CPU clock, or
#: None for a budget open alone, whose deadline is the timer's own (no clock read for it)]
_open: list[list] = []
#: the process that ``_open`` and the signal handler belong to (a forked child starts afresh)
_owner = 0
#: CPU seconds after which a budget that has ended raises again, should the pass have swallowed it
_AGAIN = 1.0


def _clock() -> float:
    return os.times().user


def _arm() -> None:
    if _open:
        left = min(e[1] for e in _open) - _clock()
        signal.setitimer(signal.ITIMER_VIRTUAL, max(left, 0.001))
    else:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)


def _on_signal(signum: int, frame: object) -> None:
    if os.getpid() != _owner or not _open:
        return
    if _open[0][1] is None:  # one budget, timed by the timer itself
        signal.setitimer(signal.ITIMER_VIRTUAL, _AGAIN)
        raise OverTime(_open[0][0])
    now = _clock()
    for entry in _open:  # the outermost that has ended: the passes inside it end with it
        if entry[1] <= now + 0.001:
            entry[1] = now + _AGAIN
            _arm()
            raise OverTime(entry[0])
    _arm()  # early (the clock's granularity): wait for the rest


def _usable() -> bool:
    """Whether budgets can be kept here: the main thread of a process with ``setitimer``."""
    global _owner, _open
    if threading.get_ident() != threading.main_thread().ident or not hasattr(signal, "setitimer"):
        return False
    pid = os.getpid()
    if _owner != pid:  # first use in this process (a forked worker inherits the parent's list)
        signal.signal(signal.SIGVTALRM, _on_signal)
        _owner, _open = pid, []
    return True


class cpu_budget:  # a context manager named like the function it is used as
    """Run the block with ``seconds`` of user CPU time; past them, CPUBudgetExceeded (CU004) saying
    that ``what`` took longer than the budget ``name`` allows."""

    __slots__ = ("lost", "name", "seconds", "token", "what")

    def __init__(self, seconds: float, what: str, name: str = "ANALYSIS_SECONDS",
                 lost: str = "its facts are missing") -> None:
        self.seconds, self.what, self.name, self.lost, self.token = seconds, what, name, lost, None

    def __enter__(self) -> None:
        if not _usable():
            return
        self.token = token = object()
        if not _open:  # the common case: one budget, two system calls in all
            _open.append([token, None])
            signal.setitimer(signal.ITIMER_VIRTUAL, self.seconds)
            return
        now = _clock()
        if _open[0][1] is None:  # the outer budget's deadline, from what its timer has left
            _open[0][1] = now + signal.getitimer(signal.ITIMER_VIRTUAL)[0]
        _open.append([token, now + self.seconds])
        _arm()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        token = self.token
        if token is None:
            return False
        self.token = None
        try:
            _close(token)
        except OverTime as late:  # the budget ended as the block did: the block's outcome stands
            _close(token)
            if late.token is not token:
                raise
        if isinstance(exc, OverTime) and exc.token is token:
            name = self.name
            raise CPUBudgetExceeded(
                "CU004", f"{self.what} took more than {self.seconds:g} CPU seconds (budget {name}); {self.lost} "
                f"(CUAUDIT_BUDGET_{name} raises the budget)", budget=name, seconds=self.seconds) from None
        return False


def _close(token: object) -> None:
    for i in range(len(_open) - 1, -1, -1):
        if _open[i][0] is token:
            del _open[i]
            break
    if not _open:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    else:
        _arm()

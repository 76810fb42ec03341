"""Progress on long work: on stderr, on a terminal only (commands decide; see ``make_progress``).

Issue 15: a torch check showed nothing for 17 s while pip downloaded 906 MB,
then sat on one figure for 40 s while one large library was read.  So the
bar counts bytes, not files: first the download (bytes and speed, read from
the folder pip writes into: ``cuaudit.inputs.process.run_watched``), then the extraction (bytes of members done,
speed, time left, the member just read).  Rich refreshes it ten times a
second, and its spinner and elapsed time move even while one member takes
long: the terminal is never still for more than a moment.

The interface is the extraction's ``Progress`` protocol (``cuaudit.extraction``): ``start(total,
description)`` (``total`` None: unknown), ``advance(n, member="")``, ``stop()``.
"""

from __future__ import annotations

from typing import Any


class RichProgress:
    """A progress bar on stderr, in bytes (only created when stderr is a terminal)."""

    def __init__(self, console: Any = None) -> None:
        self._console = console
        self._progress = None
        self._task = None
        self._member_width = 0

    def start(self, total: int | None, description: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.stop()
        console = self._console or Console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=16), DownloadColumn(),
            TransferSpeedColumn(), TimeRemainingColumn(), TextColumn("[dim]{task.fields[member]}", markup=True),
            console=console, transient=True, refresh_per_second=10,
        )
        # What the fixed columns leave of the line goes to the member's name (none at 80 columns or less).
        self._member_width = console.width - len(description) - 62
        self._progress.start()
        self._task = self._progress.add_task(description, total=total, member="")

    def advance(self, n: int = 1, member: str = "") -> None:
        if self._progress is not None:
            from rich.markup import escape

            from cuaudit.escape import printable

            fields = {"member": escape(printable(_tail(member, self._member_width)))} if member else {}
            self._progress.update(self._task, advance=n, **fields)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _tail(path: str, width: int) -> str:
    """The end of a long member path (the file name is what tells it apart); nothing under 12 columns."""
    if width < 12:
        return ""
    return path if len(path) <= width else "…" + path[-(width - 1):]

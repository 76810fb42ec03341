"""Run a survey: list the releases the spec names, and audit the new ones on Dask.

The client lists the index, decides what is new (the store knows what it has
recorded) and writes every result as it comes back; the workers only fetch
and audit (:func:`cuaudit.survey.work.audit_release`).  Without
``--scheduler`` the cluster is a ``LocalCluster`` on this machine's cores
(worker processes, one thread each, on loopback, no dashboard).  When a
worker dies mid-task, the scheduler runs that task again on another worker;
the store replaces a wheel's record, so each release is recorded once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from cuaudit.survey.index import (
    IndexUnavailable,
    ReleaseFile,
    choose_wheel,
    configured_index_url,
    list_files,
    list_wheelhouse,
    platform_tags,
    releases,
)
from cuaudit.survey.spec import SurveySpec
from cuaudit.survey.store import SurveyStore
from cuaudit.survey.work import ReleaseResult, TaskOptions, audit_release


@dataclass
class Plan:
    """What the spec selects, what is already recorded, and what could not be listed."""

    selected: list[ReleaseFile] = field(default_factory=list)
    todo: list[ReleaseFile] = field(default_factory=list)
    #: (package, version or "", why): a package the index does not answer for, a release without a wheel
    unavailable: list[tuple[str, str, str]] = field(default_factory=list)


def plan(spec: SurveySpec, store: SurveyStore, *, index_url: str | None = None, wheelhouse: str | None = None,
         platform: str | None = None) -> Plan:
    accepted = platform_tags(platform or spec.platform)
    url = index_url or spec.index_url or (None if wheelhouse else configured_index_url())
    out = Plan()
    for sel in spec.packages:
        try:
            files = list_wheelhouse(wheelhouse, sel.name) if wheelhouse else list_files(url, sel.name)
        except (IndexUnavailable, OSError) as exc:
            out.unavailable.append((sel.name, "", str(exc)))
            continue
        by_version: dict[str, list[ReleaseFile]] = {}
        for f in files:
            by_version.setdefault(f.version, []).append(f)
        for version in sel.choose(releases(files)):
            wheel = choose_wheel(by_version[version], accepted)
            if wheel is None:
                out.unavailable.append((sel.name, version, f"no wheel for {platform or spec.platform}"))
                continue
            if wheel.upload_time is None:
                # a release's date is its first upload, whichever file that was
                first = releases(by_version[version]).get(version)
                if first is not None:
                    import dataclasses

                    wheel = dataclasses.replace(wheel, upload_time=first)
            out.selected.append(wheel)
    done = store.done(out.selected)
    out.todo = [f for f in out.selected if f.filename not in done]
    return out


@dataclass
class RunStats:
    releases: int = 0
    failed: int = 0
    bytes_audited: int = 0
    bytes_fetched: int = 0
    download_seconds: float = 0.0
    audit_seconds: float = 0.0
    wall_seconds: float = 0.0
    workers: int = 0

    @property
    def releases_per_minute(self) -> float:
        return 60 * self.releases / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def bytes_per_second(self) -> float:
        return self.bytes_audited / self.wall_seconds if self.wall_seconds else 0.0

    def as_dict(self) -> dict:
        return {**vars(self), "releases_per_minute": round(self.releases_per_minute, 2),
                "bytes_per_second": round(self.bytes_per_second)}


def execute(
    todo: Iterable[ReleaseFile],
    store: SurveyStore,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    options: TaskOptions = TaskOptions(),
    on_result: Callable[[ReleaseResult, int, int, RunStats], None] | None = None,
) -> RunStats:
    """Audit every file of ``todo`` on the cluster and record each result as it arrives."""
    todo = list(todo)
    stats = RunStats()
    if not todo:
        return stats
    from distributed import Client, LocalCluster, as_completed

    started = time.perf_counter()
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        from cuaudit.extraction import usable_cpus

        cluster = LocalCluster(n_workers=workers or usable_cpus(), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        client = Client(cluster)
    try:
        stats.workers = len(client.scheduler_info().get("workers", {}))
        # Largest first: the long tasks start early, the short ones fill the gaps at the end.
        ordered = sorted(todo, key=lambda f: -(f.size or 0))
        futures = [client.submit(audit_release, f, options, key=f"survey-{f.filename}", pure=False)
                   for f in ordered]
        total = len(futures)
        for n, fut in enumerate(as_completed(futures), 1):
            result: ReleaseResult = fut.result()
            store.record(result)
            stats.releases += 1
            stats.failed += bool(result.error)
            stats.bytes_audited += 0 if result.error else (result.file.size or 0)
            stats.bytes_fetched += result.bytes_fetched
            stats.download_seconds += result.download_seconds
            stats.audit_seconds += result.audit_seconds
            stats.wall_seconds = time.perf_counter() - started
            if on_result:
                on_result(result, n, total, stats)
            fut.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    stats.wall_seconds = time.perf_counter() - started
    return stats

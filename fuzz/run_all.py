"""Run every fuzz harness at once for a fixed time on N cores, and write a results table.

    python fuzz/run_all.py --seconds 480 --jobs 15 --out OUT [--work DIR] [--targets elf,zip,...]

Needs only cuaudit's dependencies and atheris (``pip install --no-index
--find-links .whl atheris`` on a machine without network).  Each target gets
at least one libFuzzer process; spare cores go to the slowest harnesses
first (report and text: the ones furthest from a million executions).  Processes of one target share its corpus folder (libFuzzer
reloads it every second), so they build on each other's finds.  With fewer
cores than targets, targets run in waves of ``--jobs``, each for ``--seconds``.

Every process runs in campaign mode (``CUAUDIT_FUZZ_KEEP_GOING``, see
``_common.py``): each distinct crash or hang (exception type and cuaudit
line) is saved once with its input and the run goes on.  A process that
libFuzzer itself stops (over ``--rss-mb``, past ``-timeout``) is started
again for the time left.  OUT gets three files: ``results.md`` (the table),
``results.json`` and ``details.tar.gz`` (the crashing inputs under
``crashes/<target>/``, the end of each log under ``logs/``); the corpora and
full logs stay in the work folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGETS = ("elf", "tar", "fatbin", "zip", "cython", "text", "report")
#: the order spare cores go in, round after round: the slowest harnesses twice (30 s here on one core:
#: report 1.8 k, text 12 k, then tar 80 k, cython 87 k, zip 116 k, elf 129 k, fatbin 296 k executions)
NEEDS_MORE = ("report", "text", "report", "text", "tar", "cython", "zip", "elf", "fatbin")
#: the campaign mode's file names: crash-<exception>-<file>-<line>-<sha1 prefix>
_KEEP_GOING = re.compile(r"^crash-(?P<type>\w+)-(?P<where>.+)-[0-9a-f]{12}$")
_LIBFUZZER = re.compile(r"^(?P<kind>crash|timeout|oom|leak|slow-unit)-[0-9a-f]{40}$")


@dataclass
class Result:
    target: str
    processes: int
    seconds: float = 0.0  # wall time of its wave
    process_seconds: float = 0.0
    executions: int = 0
    starts: int = 0
    peak_rss_mb: float = 0.0
    crashes: list[str] = field(default_factory=list)  # distinct "Type at file:line"
    hangs: int = 0
    ooms: int = 0
    other_artifacts: int = 0
    exits: list[int] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.executions / self.seconds if self.seconds else 0.0


def allocate(targets: list[str], jobs: int) -> list[dict[str, int]]:
    """Waves of {target: processes}: one process per target, spare cores to the slowest first."""
    if jobs < len(targets):
        return [{t: 1 for t in targets[i : i + jobs]} for i in range(0, len(targets), jobs)]
    share = {t: 1 for t in targets}
    order = [t for t in NEEDS_MORE if t in share] or list(targets)
    for i in range(jobs - len(targets)):
        share[order[i % len(order)]] += 1
    return [share]


def _executions(log: str) -> int:
    m = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log)
    if m:
        return int(m[-1])
    progress = re.findall(r"^#(\d+)\s", log, re.M)  # killed before its final stats
    return int(progress[-1]) if progress else 0


def _worker(cmd: list[str], env: dict[str, str], deadline: float, log_path: str, result: Result, lock: threading.Lock) -> None:
    """Run one libFuzzer process, again while time is left (it stops itself on an OOM or a timeout)."""
    n = 0
    while True:
        left = int(deadline - time.monotonic())
        if left < 5:
            return
        path = f"{log_path}.{n}"
        started = time.monotonic()
        with open(path, "wb") as log:
            proc = subprocess.Popen([*cmd, f"-max_total_time={left}"], stdout=log, stderr=subprocess.STDOUT, env=env,
                                    cwd=os.path.dirname(log_path), start_new_session=True)
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except BaseException:
                os.killpg(proc.pid, 9)
                proc.wait()
                raise
            proc.returncode = os.waitstatus_to_exitcode(status)
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        with lock:
            result.starts += 1
            result.process_seconds += time.monotonic() - started
            result.executions += _executions(text)
            result.peak_rss_mb = max(result.peak_rss_mb, usage.ru_maxrss / 1024)
            result.exits.append(proc.returncode)
        n += 1


def _tail(path: str, lines: int = 120) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return "".join(fh.readlines()[-lines:])


def run_wave(wave: dict[str, int], args: argparse.Namespace, results: dict[str, Result]) -> None:
    lock = threading.Lock()
    threads = []
    deadline = time.monotonic() + args.seconds
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(REPO, "src"), HERE])}
    for target, count in wave.items():
        corpus = os.path.join(args.work, "corpus", target)
        crashes = os.path.join(args.work, "crashes", target)
        logs = os.path.join(args.work, "logs")
        for d in (corpus, crashes, logs):
            os.makedirs(d, exist_ok=True)
        results[target] = Result(target, count)
        for k in range(count):
            nice = ["nice", "-n", str(args.nice)] if args.nice else []
            cmd = [*nice, args.python, os.path.join(HERE, f"fuzz_{target}.py"), f"-rss_limit_mb={args.rss_mb}", "-timeout=60",
                   "-max_len=65536", "-print_final_stats=1", f"-artifact_prefix={crashes}/", corpus,
                   os.path.join(args.work, "seeds", target)]
            penv = {**env, "CUAUDIT_FUZZ_KEEP_GOING": crashes}
            t = threading.Thread(target=_worker, args=(cmd, penv, deadline, os.path.join(logs, f"{target}-{k}.log"),
                                                       results[target], lock), daemon=True)
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    for target in wave:
        results[target].seconds = args.seconds


def collect(args: argparse.Namespace, results: dict[str, Result]) -> None:
    """Crashes from the crash folders (distinct signatures), packed into OUT/details.tar.gz with the logs' ends.

    One archive: a machine that sends back only a few files from OUT still sends everything.
    """
    import io
    import tarfile

    with tarfile.open(os.path.join(args.out, "details.tar.gz"), "w:gz") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))

        for target, r in results.items():
            src = os.path.join(args.work, "crashes", target)
            seen: set[str] = set()
            for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
                m, lf = _KEEP_GOING.match(name), _LIBFUZZER.match(name)
                if m:
                    sig = f"{m['type']} at {m['where']}"
                    if sig in seen:
                        continue
                    seen.add(sig)
                    if m["type"] == "Hang":
                        r.hangs += 1
                    else:
                        r.crashes.append(sig)
                elif lf and lf["kind"] in ("timeout", "oom", "crash"):
                    if lf["kind"] == "timeout":
                        r.hangs += 1
                    elif lf["kind"] == "oom":
                        r.ooms += 1
                    else:
                        r.crashes.append(f"libFuzzer crash {name}")
                else:
                    r.other_artifacts += 1 if lf else 0
                    continue
                with open(os.path.join(src, name), "rb") as fh:
                    add(f"crashes/{target}/{name}", fh.read())
            logs = os.path.join(args.work, "logs")
            for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
                if name.startswith(f"{target}-"):
                    add(f"logs/{name}", _tail(os.path.join(logs, name)).encode())


def _version(module: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h %cd", "--date=iso"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown commit"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown commit"


def table(results: dict[str, Result]) -> str:
    rows = ["| harness | processes | executions | exec/s | crashes (distinct) | hangs | OOMs | peak RSS |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results.values():
        crashes = f"{len(r.crashes)}" + (f": {'; '.join(r.crashes[:5])}" if r.crashes else "")
        rows.append(f"| `{r.target}` | {r.processes} | {r.executions:,} | {r.rate:,.0f} | {crashes} | {r.hangs} | "
                    f"{r.ooms} | {r.peak_rss_mb:.0f} MB |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=480, help="fuzzing time of each wave (default 480)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1), help="processes at once")
    ap.add_argument("--out", required=True, help="folder for results.md/json, crashing inputs and log tails")
    ap.add_argument("--work", help="corpora and full logs (default: OUT/../cuaudit-fuzz-work, kept between runs)")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--rss-mb", type=int, default=1024, help="libFuzzer's memory limit per process (the issue's 1 GB)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the harnesses")
    ap.add_argument("--nice", type=int, default=0, help="run the harnesses at this niceness (19 on a shared machine)")
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        ap.error(f"unknown targets: {', '.join(unknown)}")
    args.out = os.path.abspath(args.out)
    args.work = os.path.abspath(args.work or os.path.join(os.path.dirname(args.out), "cuaudit-fuzz-work"))
    os.makedirs(args.out, exist_ok=True)
    seeds = os.path.join(args.work, "seeds")
    if not os.path.isdir(seeds):
        env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "src")}
        subprocess.run([args.python, os.path.join(HERE, "make_seeds.py"), seeds], check=True, env=env)
    waves = allocate(targets, args.jobs)
    print(f"run_all: {len(targets)} targets on {args.jobs} processes, {len(waves)} wave(s) of {args.seconds} s: "
          f"{waves}", flush=True)
    results: dict[str, Result] = {}
    started = time.monotonic()
    for wave in waves:
        run_wave(wave, args, results)
    collect(args, results)
    head = (f"Fuzzing, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {args.seconds} s per wave, "
            f"{args.jobs} processes on {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"atheris {_version('atheris')}, cuaudit at {_commit()} "
            f"(wall {time.monotonic() - started:.0f} s; peak RSS: the largest process of the harness)")
    text = head + "\n\n" + table(results) + "\n"
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"header": head, "waves": waves, "results": [asdict(r) | {"exec_per_s": round(r.rate, 1)}
                                                               for r in results.values()]}, fh, indent=2)
    print(text)
    return 1 if any(r.crashes or r.hangs or r.ooms for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

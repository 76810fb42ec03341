"""Inputs we did not write: members of the real corpus, mutated, each audited by ``cuaudit check`` in a
process of its own under the issue's limits (30 s, 1 GB); prints one line per run and a summary.

    python fuzz/mutate_corpus.py OUT_DIR [COUNT]

Members are taken from the corpus wheels and sdists (``CUAUDIT_CORPUS`` or
``~/.cache/cuaudit/corpus``): extension modules and libraries up to 4 MB,
``pyproject.toml``, METADATA and RECORD files; each is mutated (bytes
flipped, runs overwritten, truncated, a region duplicated) and audited both
as a file and inside a wheel.  The same seed gives the same inputs.
"""

from __future__ import annotations

import io
import json
import os
import random
import resource
import subprocess
import sys
import tarfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def samples(corpus: str, rng: random.Random, per_archive: int = 3) -> list[tuple[str, bytes]]:
    out = []
    for name in sorted(os.listdir(corpus)):
        path = os.path.join(corpus, name)
        if name.endswith(".whl") and os.path.getsize(path) < 200 * 1024**2:
            with zipfile.ZipFile(path) as zf:
                infos = [i for i in zf.infolist() if i.file_size < 4 * 1024**2 and
                         (i.filename.endswith((".so", "METADATA", "RECORD")) or ".so." in i.filename)]
                for info in rng.sample(infos, min(per_archive, len(infos))):
                    out.append((info.filename, zf.read(info)))
        elif name.endswith(".tar.gz"):
            with tarfile.open(path) as tf:
                for m in tf.getmembers():
                    if m.isfile() and m.name.endswith(("pyproject.toml", "PKG-INFO", "setup.py")):
                        out.append((m.name, tf.extractfile(m).read()))
    return out


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(4)
        if not b:
            break
        at = rng.randrange(len(b))
        if op == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[at:at + 8] = rng.choice([b"\xff" * 8, b"\0" * 8, b"\x7f\xff\xff\xff\xff\xff\xff\xff", os.urandom(8)])
        elif op == 2:
            del b[rng.randrange(len(b)):]
        else:
            n = rng.randint(1, 4096)
            b[at:at] = b[at:at + n]
    return bytes(b)


def limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 * 1024**3, 4 * 1024**3))  # a runaway is stopped, not the machine


def main(out_dir: str, count: int = 60) -> int:
    rng = random.Random(13)
    corpus = os.environ.get("CUAUDIT_CORPUS") or os.path.expanduser("~/.cache/cuaudit/corpus")
    os.makedirs(out_dir, exist_ok=True)
    pool = samples(corpus, rng)
    results = []
    for i in range(count):
        member, data = rng.choice(pool)
        bad = mutate(data, rng)
        base = os.path.basename(member)
        target = os.path.join(out_dir, f"{i:03d}-{base}")
        if i % 2:  # inside a wheel
            target = os.path.join(out_dir, f"m{i:03d}-1.0-py3-none-any.whl")
            with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(f"m{i:03d}/{base}" if "dist-info" not in member else member, bad)
        else:
            with open(target, "wb") as fh:
                fh.write(bad)
        started = time.monotonic()
        proc = subprocess.Popen(
            ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "cuaudit", "check", target, "--isolated", "--no-cache",
             "-f", "json", "-j", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit, start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src")},
        )
        try:
            proc.stdout_text, proc.stderr_text = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # /usr/bin/time and cuaudit under it
            proc.communicate()
            results.append(False)
            print(f"HANG {os.path.basename(target)} <- {member}: still running after 60 s (killed)", flush=True)
            continue
        proc.stdout, proc.stderr = proc.stdout_text, proc.stderr_text
        seconds = time.monotonic() - started
        rss_mb = int(proc.stderr.strip().splitlines()[-1]) // 1024 if proc.stderr.strip() else -1
        try:
            codes = sorted({f["code"] for f in json.loads(proc.stdout)["findings"] if f["code"].startswith("CU0")})
        except ValueError:
            codes = ["no report"]
        ok = proc.returncode in (0, 1) and "CU011" not in codes and seconds < 30 and rss_mb < 1024
        results.append(ok)
        print(f"{'ok ' if ok else 'BAD'} {os.path.basename(target)} <- {member}: rc={proc.returncode} "
              f"{seconds:.1f}s {rss_mb}MB {' '.join(codes)}", flush=True)
    print(f"{sum(results)}/{len(results)} within the targets")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 60))

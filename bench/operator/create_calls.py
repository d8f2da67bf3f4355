"""Function call counts per created object: the benchmark operator under cProfile, on two kubeop trees.

CPU times on a shared machine are noisy; call counts are not. For each tree (``--src label=path``) this
starts bench/operator/kubeop_operator.py with ``BENCH_PROFILE`` set, creates N Widgets (the create phase
of run.py), waits until every one has converged, stops the operator (its profile is written on SIGTERM),
and does the same again with N/2 Widgets. The difference of the two profiles, divided by N/2, is what
one more created object costs: start-up, the initial list and shutdown cancel out.

    flock /tmp/kubeop-bench.lock .venv/bin/python bench/operator/create_calls.py --n 1000 \
        --src base=/tmp/kubeop-base/src --src new=src [--top 40] [--out calls.json]

``--tool callgrind`` runs the operator under valgrind's callgrind instead (no cProfile): the rows
are machine instructions by C function (slow: use a small N).
``--tool strace`` counts its system calls (strace -c). ``--tool none`` runs it as it is and reads
its user and system CPU time and page faults from /proc over the N creates (noisy: use --repeat).
Several --tool run one after the other on one control plane; each but none is the same N minus
N/2 difference, and with ``--repeat R`` the trees alternate R times and the rows are the mean.

Prints, per tree, the function calls per object, then the functions whose calls per object differ most
between the first tree and each other one (new rows included), and each tree's largest own-time rows.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as bench  # noqa: E402  (the benchmark's driver: its CRD, Widget resource and helpers)

from kubeop.client import Client  # noqa: E402
from kubeop.testing import ControlPlane  # noqa: E402

Row = tuple[float, float]  # (calls, own seconds)


def _site(key: tuple[str, int, str]) -> str:
    """A function's name stable across trees: the path from the package down (no line numbers)."""
    file, _, name = key
    name = re.sub(r" at 0x[0-9a-f]+", "", name)  # a built-in's address differs between processes
    for marker in ("/kubeop/", "/site-packages/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{file}:{name}"


def load(path: str) -> dict[str, Row]:
    rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for key, (_, calls, own, _, _) in pstats.Stats(path).stats.items():  # type: ignore[attr-defined]
        row = rows[_site(key)]
        row[0] += calls
        row[1] += own
    return {site: (calls, own) for site, (calls, own) in rows.items()}


def load_callgrind(path: str) -> dict[str, Row]:
    """Instructions by C function (callgrind_annotate's rows), as (instructions, 0) rows."""
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--inclusive=no", path],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for line in text.splitlines():
        found = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.+)$", line)
        if found is None:
            continue
        where = found[2]
        if where == "PROGRAM TOTALS":  # the rows' sum (the report adds them up)
            continue
        code, _, lib = where.partition(" [")
        file, _, function = code.rpartition(":")
        library = os.path.basename(lib.rstrip("]")) or os.path.basename(file)
        site = f"{library}:{function.split(chr(39))[0]}"  # _PyEval_EvalFrameDefault'2: one row
        rows[site][0] += int(found[1].replace(",", ""))
    return {site: (count, 0.0) for site, (count, _) in rows.items()}


def _proc_stat(pid: int) -> dict[str, float]:
    """A process's user and system CPU (ms) and page faults so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ms = 1000 / os.sysconf("SC_CLK_TCK")
    return {
        "user_ms": int(fields[11]) * ms,
        "system_ms": int(fields[12]) * ms,
        "minor_faults": float(fields[7]),
        "major_faults": float(fields[9]),
    }


def _proc_rows(rows: dict[str, Row]) -> str:
    shown = sorted((site[5:], count) for site, (count, _) in rows.items() if site.startswith("proc:"))
    return ", ".join(f"{name} {count:.4g}" for name, count in shown)


def load_strace(path: str) -> dict[str, Row]:
    """System calls by name (strace -c's table), as (calls, seconds) rows."""
    rows: dict[str, Row] = {}
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[1].replace(".", "").isdigit() and parts[-1] != "total":
            rows[f"syscall:{parts[-1]}"] = (float(parts[3]), float(parts[1]))
    return rows


async def profile_once(
    cp: ControlPlane, src: str, n: int, workdir: Path, label: str, *, tool: str = "cprofile"
) -> dict[str, Row]:
    ns = f"calls-{label}-{n}-{int(time.time() * 1000) % 100000}"
    cp.create_namespace(ns)
    prefix = workdir / f"{tool}-{label}-{n}"
    env = dict(cp.env(), PYTHONPATH=src, BENCH_RESYNC="0", PYTHONUNBUFFERED="1")
    command = [sys.executable, str(HERE / "kubeop_operator.py"), "16"]
    if tool == "callgrind":  # instructions, counted by the CPU simulator: no noise from the machine
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}.%p", *command]
    elif tool == "strace":
        command = ["strace", "-f", "-c", "-o", f"{prefix}.strace", *command]
    else:
        env["BENCH_PROFILE"] = str(prefix)
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=HERE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1)
        before = _proc_stat(proc.pid)
        async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
            sem = asyncio.Semaphore(32)

            async def create(i: int) -> None:
                body = {"apiVersion": "bench.kubeop.dev/v1", "kind": "Widget", "spec": {"value": "one"}}
                body["metadata"] = {"name": f"w{i:05d}", "namespace": ns}
                async with sem:
                    await client.create(body, resource=bench.WIDGETS)

            await asyncio.gather(*(create(i) for i in range(n)))
            await bench.wait_converged(client, ns, n, "one", timeout=900)
            await asyncio.sleep(1.0)
        after = _proc_stat(proc.pid)
    finally:
        pid = proc.pid
        if tool == "strace":  # stop the operator, not strace (which then writes its counts)
            pid = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        try:
            proc.wait(300 if tool == "callgrind" else 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        await bench.clear_namespace(cp, ns)
    if tool == "none":
        return {f"proc:{k}": (after[k] - before[k], 0.0) for k in after}
    if tool == "callgrind":
        return load_callgrind(f"{prefix}.{proc.pid}")
    if tool == "strace":
        return load_strace(f"{prefix}.strace")
    rows = load(f"{prefix}.{proc.pid}")
    collections = json.loads(Path(f"{prefix}.{proc.pid}.gc").read_text())
    for gen, count in enumerate(collections):  # garbage collections, as rows of their own
        rows[f"gc:generation {gen} collections"] = (float(count), 0.0)
    return rows


def per_object(big: dict[str, Row], small: dict[str, Row], n: int) -> dict[str, Row]:
    out = {}
    for site in big.keys() | small.keys():
        c1, t1 = big.get(site, (0.0, 0.0))
        c0, t0 = small.get(site, (0.0, 0.0))
        if c1 - c0 or t1 - t0:
            out[site] = ((c1 - c0) / n, (t1 - t0) / n)
    return out


_WAITING = "~:<method 'poll' of 'select.epoll' objects>"  # the event loop waiting: not CPU


def report(trees: dict[str, dict[str, Row]], top: int) -> None:
    labels = list(trees)
    for label, rows in trees.items():
        calls = sum(c for c, _ in rows.values())
        own = sum(t for s, (_, t) in rows.items() if s != _WAITING)
        print(f"{label}: {calls:,.1f} counted per object (calls or instructions), {own * 1e3:.3f} ms own")
    first = trees[labels[0]]
    for label in labels[1:]:
        rows = trees[label]
        none = (0.0, 0.0)
        diff = sorted(
            ((rows.get(s, none)[0] - first.get(s, none)[0], s) for s in rows.keys() | first.keys()),
            key=lambda d: -abs(d[0]),
        )
        print(f"\ncalls per object, {labels[0]} -> {label} (largest differences)")
        for delta, site in diff[:top]:
            a, b = first.get(site, (0.0, 0.0))[0], rows.get(site, (0.0, 0.0))[0]
            print(f"  {delta:+9.2f}  {a:8.2f} -> {b:8.2f}  {site}")
    for label, rows in trees.items():
        own = sum(t for s, (_, t) in rows.items() if s != _WAITING) or 1.0
        print(f"\n{label}: largest own time per object (the event loop's waiting left out)")
        busy = [(s, r) for s, r in rows.items() if s != _WAITING]
        for site, (calls, t) in sorted(busy, key=lambda r: -r[1][1])[:top]:
            print(f"  {t / own:6.1%} {t * 1e6:8.1f} us {calls:8.2f} calls  {site}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--src", action="append", required=True, help="label=path of a kubeop src/")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--out", help="write the per-object rows of every tree as JSON")
    parser.add_argument("--repeat", type=int, default=1, help="alternate the trees this many times")
    parser.add_argument("--keep", help="a directory to keep the profiles in (for pstats' callers)")
    parser.add_argument(
        "--tool",
        action="append",
        choices=("cprofile", "callgrind", "strace", "none"),
        help="what to count: Python calls (cprofile, the default), instructions (callgrind), system calls",
    )
    args = parser.parse_args()
    srcs = dict(s.split("=", 1) for s in args.src)
    half = args.n // 2
    tools = args.tool or ["cprofile"]
    found: dict[str, dict[str, dict[str, Row]]] = {tool: {} for tool in tools}
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(full=False) as cp:
        if args.keep:
            tmp = args.keep
            os.makedirs(tmp, exist_ok=True)
        cp.install_crds([bench.CRD])
        await bench.warm_up(cp, args.n)
        for tool in tools:
            sums: dict[str, dict[str, list[float]]] = {}
            for label in srcs:
                sums[label] = defaultdict(lambda: [0.0, 0.0])
            for _ in range(args.repeat):
                for label, src in srcs.items():
                    path = os.path.abspath(src)
                    run = functools.partial(profile_once, cp, path, workdir=Path(tmp), label=label)
                    big = await run(args.n, tool=tool)
                    if tool == "none":  # measured from the operator's start on: nothing to cancel out
                        rows = {site: (count / args.n, 0.0) for site, (count, _) in big.items()}
                    else:
                        rows = per_object(big, await run(half, tool=tool), args.n - half)
                    print(f"  {tool} {label}: {_proc_rows(rows)}", file=sys.stderr)
                    for site, (count, seconds) in rows.items():
                        sums[label][site][0] += count / args.repeat
                        sums[label][site][1] += seconds / args.repeat
            found[tool] = {label: {s: (c, t) for s, (c, t) in rows.items()} for label, rows in sums.items()}
    for tool, trees in found.items():
        print(f"==== {tool}")
        report(trees, args.top)
    if args.out:
        Path(args.out).write_text(json.dumps({"n": args.n, "srcs": srcs, "per_object": found}, indent=1))


if __name__ == "__main__":
    asyncio.run(main())

"""Before/after for kubeop's webhook server: the same server.py run from two source trees.

One fresh etcd + kube-apiserver; two kubeop webhook servers on loopback, each in its own process:
``before`` imports kubeop from ``--before`` (e.g. a checkout of main's ``src``), ``after`` from this
tree. Each has its own ValidatingWebhookConfiguration (objectSelector ``bench=before`` /
``bench=after``). Phases of ``--n`` creates are interleaved: none, before, after (the order of
the two servers alternates from one repetition to the next), at concurrency 1 and 32; per phase
p50/p99 latency and the server process's CPU per review, as in run.py.

    git worktree add /tmp/kubeop-main main
    flock /tmp/kubeop-bench.lock .venv/bin/python bench/webhook/compare.py --before /tmp/kubeop-main/src \\
        --n 1000 --reps 4 --out /tmp/compare.json
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubeop.testing import ControlPlane
from kubeop.webhook import Endpoint, local_certificates, webhook_configurations

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from run import VWC, free_port, measure  # noqa: E402
from server import allow  # noqa: E402

SERVERS = ("before", "after")


def hook_name(which: str) -> str:
    return f"bench.webhook.{which}.dev"


def configuration(base: dict[str, Any], which: str, port: int) -> dict[str, Any]:
    config = copy.deepcopy(base)
    config["metadata"] = {"name": f"bench-{which}-validating"}
    (hook,) = config["webhooks"]
    hook["name"] = hook_name(which)
    hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}/validate"
    hook["objectSelector"] = {"matchLabels": {"bench": which}}
    return config


def order(rep: int) -> tuple[str, ...]:
    """The baseline first, then the two servers, alternating which goes first."""
    return ("none", *(SERVERS if rep % 2 == 0 else SERVERS[::-1]))


def start(which: str, src: str, port: int, cert_dir: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, str(HERE / "server.py"), str(port), str(cert_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise SystemExit(f"the {which} webhook server did not start (printed {line!r})")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the src directory of the baseline kubeop")
    parser.add_argument("--n", type=int, default=1000, help="creates per phase")
    parser.add_argument("--reps", type=int, default=4, help="rounds of (none, before, after) per concurrency")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sources = {
        "before": str(Path(args.before).resolve()),
        "after": str((HERE.parent.parent / "src").resolve()),
    }
    with ControlPlane(full=False) as cp:
        cert_dir = cp.data_dir / "webhook-certs"
        certs = local_certificates(cert_dir)
        ports = {s: free_port() for s in SERVERS}
        servers = {s: start(s, sources[s], ports[s], cert_dir) for s in SERVERS}
        try:
            endpoint = Endpoint.url(f"https://127.0.0.1:{ports['before']}", ca_bundle=certs.ca_pem)
            (base,) = webhook_configurations([allow], "bench", endpoint)
            for s in SERVERS:
                cp.api.call("POST", VWC, configuration(base, s, ports[s]))
            time.sleep(2)  # the API server's informer picks the configurations up
            pids = {s: p.pid for s, p in servers.items()}
            hooks = {s: hook_name(s) for s in SERVERS}
            results = asyncio.run(measure(cp, pids, args.n, args.reps, hooks=hooks, order=order))
            print(json.dumps(results["summary"], indent=1), flush=True)
        finally:
            for proc in servers.values():
                proc.terminate()
                tail, _ = proc.communicate(timeout=10)
                print(tail.strip(), flush=True)
    results["command"] = " ".join(["bench/webhook/compare.py", *sys.argv[1:]])
    results["sources"] = sources
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

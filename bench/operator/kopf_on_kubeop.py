"""Run kopf_operator.py (or another kopf operator file), unchanged, on kubeop's kopf API.

``import kopf`` in the operator resolves to :mod:`kubeop.kopf` (the module is registered under
kopf's name before the file runs), so the file is the one real kopf runs, byte for byte; then
the handlers run as ``python -m kubeop.kopf run --all-namespaces --standalone`` would, with as
many workers as the native kubeop operator gets and its resync period (BENCH_RESYNC). Needs the
``kubernetes`` client the operator uses: the benchmark runs this with bench/operator/.venv-kopf,
where kubeop's own dependencies are installed too.

Operators "kopf-on-kubeop" (kopf_operator.py) and "kopf-async-on-kubeop" (kopf_operator_async.py,
whose handlers use kubeop's own Client and need no ``kubernetes`` package).

Run: KUBECONFIG=... python kopf_on_kubeop.py [workers] [operator file]
"""

from __future__ import annotations

import logging
import os
import runpy
import sys
import threading
from pathlib import Path

import kubeop.kopf

HERE = Path(__file__).resolve().parent


def main() -> None:
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    script = sys.argv[2] if len(sys.argv) > 2 else "kopf_operator.py"
    logging.basicConfig(level=logging.WARNING)
    sys.modules["kopf"] = kubeop.kopf
    runpy.run_path(str(HERE / script), run_name="__kopf_script__")
    ready = threading.Event()
    threading.Thread(target=lambda: ready.wait() and print("ready", flush=True), daemon=True).start()
    options = {
        "clusterwide": True,
        "standalone": True,
        "workers": workers,
        "resync_period": float(os.environ.get("BENCH_RESYNC", "0")),
        "ready_flag": ready,
    }
    profile = os.environ.get("BENCH_PROFILE")
    if profile:  # cProfile the main thread (not sync handlers' threads: async ones are in); on SIGTERM
        import cProfile

        out = f"{profile}.{os.getpid()}"  # one file per process: the idle phase restarts it
        cProfile.runctx("kopf.run(**options)", {"kopf": kubeop.kopf}, {"options": options}, out)
    else:
        kubeop.kopf.run(**options)


if __name__ == "__main__":
    main()

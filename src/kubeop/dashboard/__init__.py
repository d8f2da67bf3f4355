"""A live web dashboard of an operator: what each controller does, and why an object does not converge.

Turned on with ``Manager(dashboard=Dashboard())`` or ``kubeop run --dashboard``; off by default,
and then nothing here runs and no hook is installed. See docs/concepts/dashboard.md.

- :mod:`kubeop.dashboard.ring`: per-controller rings of 5-second steps;
- :mod:`kubeop.dashboard.recorder`: what is kept of the run, in bounded memory;
- :mod:`kubeop.dashboard.traffic`: the webhooks' requests, denials, errors and latency;
- :mod:`kubeop.dashboard.aggregate`: the pages' data;
- :mod:`kubeop.dashboard.sse`: server-sent events;
- :mod:`kubeop.dashboard.server`: the HTTP server (the Manager runs it as one of its runnables).
"""

from kubeop.dashboard.aggregate import Sources
from kubeop.dashboard.recorder import Recorder
from kubeop.dashboard.server import DashboardServer

__all__ = ["DashboardServer", "Recorder", "Sources"]

"""Trigger: requests for a controller from outside its watches.

    trigger = Trigger()
    manager.add(Controller.for_(Release).triggered_by(trigger).reconcile(reconcile))
    ...
    trigger(Request("default", "web"))      # e.g. from a callback of another system, any thread

controller-runtime's channel source and kube-rs' ``reconcile_on`` do the same. A
:class:`~kubeop.controller.Controller` is a description and has no queue; every running
controller made of a description with ``triggered_by(trigger)`` is connected to the trigger
while it runs, and each receives what the trigger is given. A request given while none runs goes
nowhere: a controller that starts reconciles every object its watches list anyway. A trigger
may be called from any thread (a sync reconciler, another library's callback): the request is
handed to the event loop each controller runs on.
"""

from __future__ import annotations

from collections.abc import Callable

from kubeop.controller.request import Request

__all__ = ["Trigger"]


class Trigger:
    """Call it with a :class:`Request` to enqueue that request in the controllers it triggers."""

    __slots__ = ("_targets",)

    def __init__(self) -> None:
        self._targets: tuple[Callable[[Request], None], ...] = ()

    def __call__(self, request: Request) -> None:
        if not isinstance(request, Request):
            raise TypeError(
                f"a Trigger takes a Request, got {type(request).__name__}: "
                "call trigger(Request(namespace, name))"
            )
        for enqueue in self._targets:
            enqueue(request)

    def connect(self, enqueue: Callable[[Request], None]) -> Callable[[], None]:
        """Send every request to ``enqueue`` too, until the returned function is called."""
        self._targets = (*self._targets, enqueue)

        def disconnect() -> None:
            self._targets = tuple(t for t in self._targets if t is not enqueue)

        return disconnect

    def __repr__(self) -> str:
        return f"<Trigger connected={len(self._targets)}>"

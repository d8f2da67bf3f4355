"""kubeop.controller: reconcile loops on top of the shared cache and the work queue.

``Controller.for_(Kind).owns(Child).watches(Other, map_fn).reconcile(fn)`` (an immutable
description, which the manager runs); ``Trigger`` for requests from elsewhere; ``Request`` /
``Result`` / ``TerminalError``; predicates; handlers; the reconciler client (cached reads,
compare-before-write helpers, finalizers) and the ``WritePolicy`` that fences and labels its
writes; dependents and their workflow (``Dependent``, ``Workflow``); ownership helpers; status
conditions; events.
"""

from kubeop.controller.client import ReconcilerClient, contains, merge_desired
from kubeop.controller.conditions import find_condition, is_true, set_condition
from kubeop.controller.context import Context
from kubeop.controller.controller import Controller, Reconciler
from kubeop.controller.dependent import Dependent, DependentState
from kubeop.controller.events import EventRecorder
from kubeop.controller.handler import EventHandler, enqueue_for_object, enqueue_for_owner, enqueue_from_map
from kubeop.controller.metrics import Metrics
from kubeop.controller.ownership import OwnershipError, set_controller_reference, set_owner_reference
from kubeop.controller.predicate import (
    AnnotationChanged,
    GenerationChanged,
    LabelChanged,
    Predicate,
    ResourceVersionChanged,
    and_,
    label_selector,
    not_,
    or_,
)
from kubeop.controller.request import Request, Result, TerminalError, request_for
from kubeop.controller.trigger import Trigger
from kubeop.controller.workflow import DependentError, Workflow, WorkflowResult
from kubeop.controller.write_policy import WritePolicy

__all__ = [
    "AnnotationChanged",
    "Context",
    "Controller",
    "Dependent",
    "DependentError",
    "DependentState",
    "EventHandler",
    "EventRecorder",
    "GenerationChanged",
    "LabelChanged",
    "Metrics",
    "OwnershipError",
    "Predicate",
    "Reconciler",
    "ReconcilerClient",
    "Request",
    "ResourceVersionChanged",
    "Result",
    "TerminalError",
    "Trigger",
    "Workflow",
    "WorkflowResult",
    "WritePolicy",
    "and_",
    "contains",
    "enqueue_for_object",
    "enqueue_for_owner",
    "enqueue_from_map",
    "find_condition",
    "is_true",
    "label_selector",
    "merge_desired",
    "not_",
    "or_",
    "request_for",
    "set_condition",
    "set_controller_reference",
    "set_owner_reference",
]

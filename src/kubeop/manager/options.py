"""The Manager's options objects: what a user sets, grouped by the part of the run it shapes.

    Manager(
        name="application-operator",
        leader_election=LeaderElection(namespace="operators"),
        serving=Serving(metrics_address="0.0.0.0:8443", health_address="0.0.0.0:8081"),
        runtime=Runtime(graceful_shutdown_timeout=60),
    )

The Manager's keywords of before (``metrics_address=``, ``lease_duration=``...) still work: each
maps onto its field here, with a DeprecationWarning naming it (``_resolve``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from kubeop.controller import Request

if TYPE_CHECKING:
    from kubeop.webhook.rotator import CertSecret

__all__ = [
    "Dashboard",
    "DeprecatedKeywords",
    "KeyFn",
    "LeaderElection",
    "Runtime",
    "Serving",
    "Sharding",
    "WebhookLimits",
]

KeyFn = Callable[[str, Request], str]
"""``Sharding(key=...)``: ``key(controller, request)``, the string hashed to pick an object's owner."""


@dataclass(frozen=True)
class LeaderElection:
    """One replica leads (holds the Lease ``id`` in ``namespace``) and runs the controllers.

    ``id``: the Lease's name (default ``<manager name>-leader``); ``namespace``: the client's
    namespace, else ``default``; the timings as client-go's (seconds); ``release_on_cancel``:
    give the Lease up on a graceful stop, so that the next leader need not wait it out.
    """

    id: str | None = None
    namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True


@dataclass(frozen=True)
class Sharding:
    """The Manager's sharding option (see the module docstring).

    ``name``: the ring (default: the manager's name); ``namespace``: where its Leases live
    (default: the client's namespace, else ``default``); ``identity``: this replica's (default:
    host name and random digits; at most 63 lowercase letters, digits, '-' and '.', starting and
    ending with a letter or digit, as peers ignore any other); ``unsharded``: names of the
    controllers that one replica reconciles whole; ``key``: ``key(controller, request)`` the
    string hashed to pick the owner (default ``namespace/name``: objects sharing a key function's
    value always share a replica); ``events``: a ShardAcquired Event on each object that moved
    to this replica (predicate mode); ``labels``: label mode (see the module docstring);
    ``lease_duration``, ``renew_deadline``, ``retry_period``: the shard Leases' timings (seconds).
    """

    name: str | None = None
    namespace: str | None = None
    identity: str | None = None
    unsharded: Collection[str] = field(default_factory=frozenset)
    key: KeyFn | None = None
    events: bool = True
    labels: bool = False
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class WebhookLimits:
    """The webhook server's caps against floods (kubeop.webhook.server): the defaults are its own.

    ``max_body``: the largest request body (bytes; larger ones get 413 before they are read);
    ``max_connections``: open connections at once (over it the longest idle one is closed);
    ``max_bytes_in_flight``: request bodies held at once (bytes; at least ``max_body``);
    ``header_timeout``: seconds for a request head (the TLS handshake included);
    ``body_timeout``: seconds for its body, and for a peer to read an answer.
    """

    max_body: int = 7 * 1024 * 1024
    max_connections: int = 1024
    max_bytes_in_flight: int = 64 * 1024 * 1024
    header_timeout: float = 5.0
    body_timeout: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_body", "max_connections", "max_bytes_in_flight"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:  # a bool is no size
                raise ValueError(f"WebhookLimits({name}={value!r}): must be a whole number of at least 1")
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"WebhookLimits({name}={value!r}): must be a number of seconds above 0")
        if self.max_bytes_in_flight < self.max_body:
            raise ValueError(
                f"WebhookLimits(max_bytes_in_flight={self.max_bytes_in_flight!r}) is below "
                f"max_body={self.max_body!r}: the largest request could never be read; raise it"
            )


@dataclass(frozen=True)
class Serving:
    """What the manager serves over HTTP(S): metrics, the health probes and the webhooks.

    ``None`` for an address serves nothing there. ``metrics_secure``: HTTPS with authentication
    (None: unless the metrics address is loopback); ``metrics_cert_dir``: its ``tls.crt`` and
    ``tls.key`` (None: a self-signed certificate). ``webhook_cert_dir``: the webhook server's
    certificate (None: one made for the address, or kept by ``webhook_cert_secret``'s rotator).
    ``webhook_limits``: the webhook server's caps (body size, connections, timeouts).
    """

    metrics_address: str | None = "127.0.0.1:8080"
    health_address: str | None = "127.0.0.1:8081"
    metrics_secure: bool | None = None
    metrics_cert_dir: str | None = None
    webhook_address: str = "127.0.0.1:9443"
    webhook_cert_dir: str | None = None
    webhook_cert_secret: CertSecret | None = None
    webhook_limits: WebhookLimits = WebhookLimits()


@dataclass(frozen=True)
class Runtime:
    """How the run behaves: shutdown and sync bounds, cache resync, writes, sync workers.

    ``graceful_shutdown_timeout``: how long in-flight reconciles may finish after a stop (a
    runnable still running 5 s after it is cancelled, and the run raises TimeoutError naming it);
    ``cache_sync_timeout``: how long a controller waits for its caches; ``resync_period``: the
    informers' (0: never); ``field_manager``: the writes' (default: the manager's name);
    ``sync_workers``: threads running synchronous reconcilers.
    """

    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    resync_period: float = 0.0
    field_manager: str | None = None
    sync_workers: int = 8


@dataclass(frozen=True)
class Dashboard:
    """The live web dashboard (:mod:`kubeop.dashboard`), served while the manager runs.

    ``address``: where it listens (loopback by default: ``kubectl port-forward`` reaches it in a
    pod); ``secure``: HTTPS, and only for callers the API server authenticates and RBAC lets
    ``get`` the non-resource URL ``/dashboard`` (as the metrics endpoint; None: unless the
    address is loopback); ``cert_dir``: its ``tls.crt``/``tls.key`` (None: self-signed).
    ``refresh``: seconds between the pages' updates. What it keeps (its memory bound):
    ``reconciles_per_object`` reconciles of each of the last ``objects`` objects reconciled, at
    most ``objects`` failing objects, ``log_lines`` log lines of reconciles, 5 minutes of
    5-second steps per controller.
    """

    address: str = "127.0.0.1:8090"
    secure: bool | None = None
    cert_dir: str | None = None
    refresh: float = 1.0
    objects: int = 1000
    reconciles_per_object: int = 20
    log_lines: int = 5000

    def __post_init__(self) -> None:
        if not self.refresh > 0:
            raise ValueError(
                f"Dashboard(refresh=...) must be a positive number of seconds, not {self.refresh!r}"
            )
        for name in ("objects", "reconciles_per_object", "log_lines"):
            if getattr(self, name) < 1:
                raise ValueError(f"Dashboard({name}=...) must be at least 1, not {getattr(self, name)!r}")


def _dashboard_from_env(value: str | None) -> Dashboard | None:
    """The dashboard ``KUBEOP_DASHBOARD`` asks for (``kubeop run --dashboard`` sets it): ``1``,
    ``true`` or ``yes`` for the default address, a ``host:port`` for that one; else none."""
    value = (value or "").strip()
    if not value or value.lower() in ("0", "false", "no", "off"):
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        return Dashboard()
    if ":" not in value:
        raise ValueError(f"KUBEOP_DASHBOARD={value!r}: use 1 (127.0.0.1:8090) or an address host:port")
    return Dashboard(address=value)


class DeprecatedKeywords(TypedDict, total=False):
    """The Manager's keywords of before the options objects (each names its new home)."""

    metrics_address: str | None
    health_address: str | None
    metrics_secure: bool | None
    metrics_cert_dir: str | None
    webhook_address: str
    webhook_cert_dir: str | None
    webhook_cert_secret: CertSecret | None
    leader_election_id: str | None
    leader_election_namespace: str | None
    lease_duration: float
    renew_deadline: float
    retry_period: float
    release_on_cancel: bool
    graceful_shutdown_timeout: float
    cache_sync_timeout: float
    resync_period: float
    field_manager: str | None
    sync_workers: int


_SERVING = {f.name for f in dataclasses.fields(Serving)} - {"webhook_limits"}  # newer than the keywords
_RUNTIME = {f.name for f in dataclasses.fields(Runtime)}
_ELECTION = {
    "leader_election_id": "id",
    "leader_election_namespace": "namespace",
    "lease_duration": "lease_duration",
    "renew_deadline": "renew_deadline",
    "retry_period": "retry_period",
    "release_on_cancel": "release_on_cancel",
}
_TIMINGS = ("lease_duration", "renew_deadline", "retry_period")


@dataclass(frozen=True)
class _Options:
    leader_election: LeaderElection | None
    sharding: Sharding | None
    serving: Serving
    runtime: Runtime


def _resolve(
    leader_election: bool | LeaderElection,
    sharding: Sharding | None,
    serving: Serving | None,
    runtime: Runtime | None,
    keywords: Mapping[str, Any],
) -> _Options:
    """The options objects, with the old keywords ``keywords`` mapped onto them (a
    DeprecationWarning each); a keyword given beside its options object is an error."""
    unknown = sorted(set(keywords) - _SERVING - _RUNTIME - set(_ELECTION))
    if unknown:
        raise TypeError(f"Manager() got an unexpected keyword argument {unknown[0]!r}")
    election = LeaderElection() if leader_election is True else leader_election or None
    served = {k: v for k, v in keywords.items() if k in _SERVING}
    tuned = {k: v for k, v in keywords.items() if k in _RUNTIME}
    elected = {_ELECTION[k]: v for k, v in keywords.items() if k in _ELECTION}
    for key in keywords:
        home = "Serving" if key in _SERVING else "Runtime" if key in _RUNTIME else "LeaderElection"
        field = _ELECTION.get(key, key)
        if home == "LeaderElection" and sharding is not None and field in (*_TIMINGS, "namespace"):
            home = "Sharding"
        param = "leader_election" if home == "LeaderElection" else home.lower()
        warnings.warn(
            f"Manager({key}=...) is deprecated: pass Manager({param}={home}({field}=...))",
            DeprecationWarning,
            stacklevel=3,
        )
    if served:
        if serving is not None:
            raise TypeError(f"Manager: pass {sorted(served)[0]} in serving=Serving(...), not beside it")
        serving = Serving(**served)
    if tuned:
        if runtime is not None:
            raise TypeError(f"Manager: pass {sorted(tuned)[0]} in runtime=Runtime(...), not beside it")
        runtime = Runtime(**tuned)
    if elected:
        if sharding is not None:
            # the lease timings and namespace of before applied to the shard leases too
            timings = {k: v for k, v in elected.items() if k in _TIMINGS}
            if "namespace" in elected and sharding.namespace is None:
                timings["namespace"] = elected["namespace"]
            sharding = dataclasses.replace(sharding, **timings)
        if isinstance(leader_election, LeaderElection):
            raise TypeError(
                f"Manager: pass {sorted(elected)[0]} in leader_election=LeaderElection(...), not beside it"
            )
        if election is not None:
            election = dataclasses.replace(election, **elected)
    return _Options(election, sharding, serving or Serving(), runtime or Runtime())

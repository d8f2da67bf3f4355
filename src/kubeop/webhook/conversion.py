"""CRD conversion, hub and spoke: every version converts to and from one hub version.

::

    class CronTabV1Beta1(CustomResource, group=..., version="v1beta1", kind="CronTab"):
        spec: CronTabSpecV1Beta1

        def to_hub(self) -> CronTab: ...                          # v1beta1 -> v1

        @classmethod
        def from_hub(cls, hub: CronTab) -> CronTabV1Beta1: ...    # v1 -> v1beta1

    conversion = Conversion.of_models(CronTab, CronTabV1Beta1)    # CronTab (v1) is the hub

A conversion between two spokes goes through the hub. Functions over dicts work too, for kinds
without models: ``Conversion("example.com", "Widget", hub="v2", spokes={"v1": (to_hub, from_hub)})``.

Guarantees (what the API server demands of a conversion webhook): the converted object keeps the
input's ``metadata`` exactly (the converter's metadata is discarded), ``kind`` is unchanged and
``apiVersion`` is the desired one; an object already in the desired version is returned as it
came. A conversion that raises fails the whole review with the exception's message (the API
server then fails the read or write that needed it: there is no partial answer).

Limits (each answered with a failed ConversionReview naming it, never a dropped connection):
a review of more than ``max_objects`` objects (default :data:`DEFAULT_MAX_OBJECTS`) is refused,
and a review still converting at its deadline (the API server's ``?timeout=``, else 30 s) fails.
The server converts off the event loop, on the conversion's own threads (``max_threads``, see
:mod:`kubeop.webhook.threads`), decoding, converting and encoding one object at a time
(:func:`~kubeop.webhook.review.decode_conversion` with ``each``), so a large review neither
stalls the loop nor is held in memory as Python objects at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from kubeop.crd import CustomResource
from kubeop.webhook.review import BadReview, ConversionRequest, conversion_response, decode_conversion
from kubeop.webhook.threads import DEFAULT_THREADS, HandlerThreads, Saturated

__all__ = ["DEFAULT_MAX_OBJECTS", "Conversion", "Spoke"]

log = logging.getLogger("kubeop.webhook")

Obj = dict[str, Any]
Convert = Callable[[Obj], Obj]

# kube-apiserver's own timeout for a conversion webhook call (when it sends no ?timeout=).
CONVERSION_TIMEOUT = 30.0

# The API server converts a list in one review: a page of one (500 objects for client-go's
# informers and kubectl) or, unpaginated, all of it. 10,000 is 20 such pages, ~2 MB of small
# objects and about a second of the CronTab example's typed conversion on one core; the body cap
# (7 MiB) alone would let ~30,000 through. A larger list can be read in pages.
DEFAULT_MAX_OBJECTS = 10_000


class Spoke(Protocol):
    """What a spoke model implements (checked by :meth:`Conversion.of_models`)."""

    def to_hub(self) -> CustomResource:
        """This object converted to the hub (storage) version's model."""

    @classmethod
    def from_hub(cls, hub: Any) -> Any:
        """An object of this version converted from a hub version object."""


@dataclass
class Conversion:
    """The conversions of one kind (``group``/``kind``), by version, through ``hub``."""

    group: str
    kind: str
    hub: str
    spokes: Mapping[str, tuple[Convert, Convert]] = field(default_factory=dict)
    plural: str = ""
    max_objects: int = DEFAULT_MAX_OBJECTS
    max_threads: int = DEFAULT_THREADS
    _threads: HandlerThreads = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.hub in self.spokes:
            raise ValueError(f"{self.kind}: version {self.hub} is the hub and cannot also be a spoke")
        if self.max_objects < 1:
            raise ValueError(f"{self.kind}: max_objects must be positive, not {self.max_objects}")
        self._threads = HandlerThreads(self.max_threads)

    @property
    def stuck_calls(self) -> int:
        """Conversions still running past their review's deadline (a metric reads it)."""
        return self._threads.stuck

    @property
    def versions(self) -> list[str]:
        """Every version the conversion serves: the hub first, then the spokes."""
        return [self.hub, *self.spokes]

    @property
    def path(self) -> str:
        """Where the server serves this conversion: ``/convert/<plural>.<group>``."""
        return f"/convert/{self.plural or self.kind.lower()}.{self.group}"

    @classmethod
    def of_models(
        cls,
        hub: type[CustomResource],
        *spokes: type[CustomResource],
        functions: Mapping[type[CustomResource], tuple[Callable[[Any], Any], Callable[[Any], Any]]]
        | None = None,
    ) -> Conversion:
        """Hub and spokes as CustomResource classes of one kind; each spoke has to_hub/from_hub,
        or ``functions`` maps it to ``(to_hub(spoke) -> hub, from_hub(hub) -> spoke)``."""
        for model in (hub, *spokes, *(functions or {})):
            if not (isinstance(model, type) and issubclass(model, CustomResource)):
                raise TypeError(
                    f"Conversion.of_models({getattr(model, '__name__', model)!r}): a conversion webhook "
                    "converts the versions of a CustomResource; built-in kinds (kubeop.kinds) are "
                    "converted by the API server itself, so they need none"
                )
        if not hub.is_declared():
            raise TypeError(f"{hub.__name__} declares no kind")
        functions = dict(functions or {})
        table: dict[str, tuple[Convert, Convert]] = {}
        for spoke in [*spokes, *(s for s in functions if s not in spokes)]:
            decl = spoke.__crd__
            if (decl.group, decl.kind) != (hub.__crd__.group, hub.__crd__.kind):
                raise TypeError(
                    f"{spoke.__name__} is a {decl.kind}.{decl.group}, not a version of {hub.kind}"
                )
            if decl.version == hub.__crd__.version or decl.version in table:
                raise TypeError(f"{spoke.__name__}: version {decl.version} is declared twice")
            to_hub, from_hub = getattr(spoke, "to_hub", None), spoke.__dict__.get("from_hub")
            if spoke in functions:
                up, down = functions[spoke]
                table[decl.version] = (_typed_to_hub(spoke, hub, up), _typed_from_hub(spoke, hub, down))
                continue
            if not callable(to_hub) or from_hub is None:
                raise TypeError(
                    f"{spoke.__name__} is a spoke of {hub.__name__}: define to_hub(self) -> {hub.__name__} "
                    f"and a classmethod from_hub(cls, hub: {hub.__name__}) -> {spoke.__name__}"
                )
            table[decl.version] = (_typed_to_hub(spoke, hub), _typed_from_hub(spoke, hub))
        return cls(hub.__crd__.group, hub.kind, hub.__crd__.version, table, plural=hub.__crd__.plural)

    def convert(self, obj: Obj, desired_api_version: str) -> Obj:
        """``obj`` in ``desired_api_version`` (see the module docstring for what is kept)."""
        group, _, desired = desired_api_version.rpartition("/")
        source_api = obj.get("apiVersion")
        if not isinstance(source_api, str):
            raise ValueError("the object has no apiVersion")
        source_group, _, source = source_api.rpartition("/")
        if group != self.group or source_group != self.group:
            raise ValueError(
                f"cannot convert {source_api} to {desired_api_version}: this converts {self.group}"
            )
        if obj.get("kind") != self.kind:
            raise ValueError(f"cannot convert a {obj.get('kind')!r}: this converts {self.kind}")
        for version in (source, desired):
            if version != self.hub and version not in self.spokes:
                raise ValueError(
                    f"{self.kind} version {version!r} is unknown; known: {', '.join(self.versions)}"
                )
        if source == desired:
            return obj
        hub = obj if source == self.hub else self.spokes[source][0](obj)
        out = hub if desired == self.hub else self.spokes[desired][1](hub)
        converted = dict(out)
        converted["apiVersion"] = desired_api_version
        converted["kind"] = self.kind
        if "metadata" in obj:
            converted["metadata"] = obj["metadata"]
        return converted

    def review(self, request: ConversionRequest, *, deadline: float | None = None) -> bytes:
        """The ConversionReview response: every object converted, or a failure naming the first one
        (or the limit a review broke); ``deadline`` is a :func:`time.monotonic` time."""
        run = _Run(self, deadline)
        for obj in request.objects:
            run.add(obj, request.desired_api_version)
        return run.response(request.uid, request.desired_api_version)

    async def serve(self, body: bytes, timeout: float | None = None) -> bytes:
        """The response to a request body, converted on this conversion's threads within
        ``timeout`` seconds (the API server's ``?timeout=``); BadReview if it is no review."""
        seconds = CONVERSION_TIMEOUT if not timeout else min(timeout, CONVERSION_TIMEOUT)
        budget = max(seconds - 0.2, 0.05)
        seen: dict[str, str] = {}
        # the thread stops a little before the loop gives up on it, to answer with its own count
        deadline = time.monotonic() + budget * 0.9
        try:
            async with asyncio.timeout(budget):
                answer: bytes = await self._threads.run(self.answer, body, deadline=deadline, seen=seen)
            return answer
        except BadReview:
            raise
        except TimeoutError:
            failure = f"did not finish within {seconds:g} s (a conversion function is still running)"
        except Saturated as exc:
            seen["uid"] = _first_uid(body)
            failure = (
                f"{exc.stuck} conversions are still running past their deadline (all of this "
                f"conversion's {self.max_threads} threads): refused at once"
            )
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the review itself is cancelled
            failure = "failed: a conversion function raised CancelledError"
        except Exception as exc:
            failure = f"failed: {_text(exc)}"
        message = f"converting {self.kind}.{self.group}: {failure}"
        log.warning("webhook %s: %s", self.path, message)
        uid = seen.get("uid")
        if not uid:
            raise BadReview(f"{message}, before the request's uid was read")
        return conversion_response(uid, failure=message)

    def answer(
        self, body: bytes, *, deadline: float | None = None, seen: dict[str, str] | None = None
    ) -> bytes:
        """:meth:`review` of a request body, decoded, converted and encoded one object at a time;
        :class:`~kubeop.webhook.review.BadReview` if it is not a ConversionReview. ``seen``
        gets the request's ``uid`` as soon as it is decoded."""
        run = _Run(self, deadline)
        pending: list[Obj] = []

        def each(obj: Obj, request: Mapping[str, Any]) -> None:
            uid = request.get("uid")
            if seen is not None and isinstance(uid, str):
                seen["uid"] = uid
            desired = request.get("desiredAPIVersion")
            if isinstance(desired, str):
                run.add(obj, desired)
            else:  # desiredAPIVersion after the objects (not the API server's order): convert later
                pending.append(obj)

        request = decode_conversion(body, each=each)
        if seen is not None:
            seen["uid"] = request.uid
        for obj in pending:
            run.add(obj, request.desired_api_version)
        return run.response(request.uid, request.desired_api_version)


class _Run:
    """One review's conversion, object by object, within its limits."""

    def __init__(self, conversion: Conversion, deadline: float | None) -> None:
        self.conversion, self.deadline = conversion, deadline
        self.count = 0
        self.encoded: list[bytes] = []
        self.failure: str | None = None
        self.late = -1  # objects converted when the deadline passed

    def add(self, obj: Obj, desired: str) -> None:
        self.count += 1
        if self.failure is not None or self.count > self.conversion.max_objects:
            return  # the rest is only decoded, for the review's checks and its uid
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.late = self.count - 1
            self.failure = ""
            return
        try:
            self.encoded.append(orjson.dumps(self.conversion.convert(obj, desired)))
        except Exception as exc:
            meta = obj.get("metadata")
            name = meta.get("name", "?") if isinstance(meta, dict) else "?"
            self.failure = f"converting {self.conversion.kind} {name!r} to {desired}: {_text(exc)}"

    def response(self, uid: str, desired: str) -> bytes:
        limit = self.conversion.max_objects
        if self.count > limit:
            failure = (
                f"the review has {self.count} objects, more than the {limit} this webhook converts "
                f"at once (Conversion max_objects): list {self.conversion.kind} in pages (limit=500)"
            )
            return conversion_response(uid, failure=failure)
        if self.late >= 0:
            failure = (
                f"converting {self.count} {self.conversion.kind} objects to {desired} did not finish "
                f"within the review's deadline ({self.late} converted)"
            )
            return conversion_response(uid, failure=failure)
        if self.failure is not None:
            return conversion_response(uid, failure=self.failure)
        return conversion_response(uid, encoded=self.encoded)


def _text(exc: Exception) -> str:
    try:
        return str(exc) or type(exc).__name__
    except Exception:
        return type(exc).__name__


def _dump(model: Any) -> Obj:
    out: Obj = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def _typed_to_hub(
    spoke: type[CustomResource], hub: type[CustomResource], fn: Callable[[Any], Any] | None = None
) -> Convert:
    def convert(obj: Obj) -> Obj:
        model = spoke.model_validate(obj)
        result = fn(model) if fn is not None else model.to_hub()  # type: ignore[attr-defined]
        if not isinstance(result, hub):
            raise TypeError(
                f"{spoke.__name__}.to_hub returned a {type(result).__name__}, not a {hub.__name__}"
            )
        return _dump(result)

    return convert


def _typed_from_hub(
    spoke: type[CustomResource], hub: type[CustomResource], fn: Callable[[Any], Any] | None = None
) -> Convert:
    def convert(obj: Obj) -> Obj:
        model = hub.model_validate(obj)
        result = fn(model) if fn is not None else spoke.from_hub(model)  # type: ignore[attr-defined]
        if not isinstance(result, spoke):
            raise TypeError(
                f"{spoke.__name__}.from_hub returned a {type(result).__name__}, not a {spoke.__name__}"
            )
        return _dump(result)

    return convert


class _Enough(Exception):
    pass


def _first_uid(body: bytes) -> str:
    """The request's uid, decoding no further than the first object (the API server sends the
    uid before the objects); empty if it is not there by then."""
    found: dict[str, str] = {}

    def stop(_obj: Obj, request: Mapping[str, Any]) -> None:
        uid = request.get("uid")
        if isinstance(uid, str):
            found["uid"] = uid
        raise _Enough

    with contextlib.suppress(_Enough, BadReview):
        found["uid"] = decode_conversion(body, each=stop).uid
    return found.get("uid", "")

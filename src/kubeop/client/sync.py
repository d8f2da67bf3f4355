"""SyncClient: the async Client for scripts, run on a private event loop in a daemon thread.

Every method blocks until the async one finishes and takes the same arguments (see
:class:`~kubeop.client.client.Client`). The private loop means it works from plain scripts, from
threads, and even from inside another running event loop (a notebook), where ``asyncio.run``
would refuse. Not meant for operators: they should use the async client directly.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from kubeop.client.client import Client
from kubeop.client.config import ClientConfig
from kubeop.client.watch import WatchEvent
from kubeop.core.resource import ApiResource

__all__ = ["SyncClient"]

R = TypeVar("R")


class SyncClient:
    """``with SyncClient() as k: k.get("configmaps", "x", namespace="default")``."""

    def __init__(self, config: ClientConfig | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubeop-sync-client", daemon=True)
        self._thread.start()
        self._closed = False

        async def make() -> Client:
            return Client(config)

        try:
            self._client = self._run(make())
        except BaseException:
            self._stop_loop()
            raise

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, *, context: str | None = None, **overrides: Any
    ) -> SyncClient:
        """A synchronous client for a kubeconfig's cluster (see :meth:`Client.from_kubeconfig`)."""
        from kubeop.client.kubeconfig import load_kubeconfig

        return cls(load_kubeconfig(path, context=context, **overrides))

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        if self._closed:
            coro.close()
            raise RuntimeError("the SyncClient is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def client(self) -> Client:
        """The underlying async client (use only from coroutines run by this facade)."""
        return self._client

    @property
    def namespace(self) -> str:
        """The default namespace for namespaced resources."""
        return self._client.namespace

    def resource(self, what: Any) -> ApiResource:
        """The :class:`~kubeop.core.resource.ApiResource` for any accepted way of naming one (see
        :meth:`Client.resource`).
        """
        return self._run(self._client.resource(what))

    def get(self, *args: Any, **kwargs: Any) -> Any:
        """Read one object; raises NotFound when it does not exist (see :meth:`Client.get`)."""
        return self._run(self._client.get(*args, **kwargs))

    def get_or_none(self, *args: Any, **kwargs: Any) -> Any:
        """Read one object, or None when it does not exist (see :meth:`Client.get_or_none`)."""
        return self._run(self._client.get_or_none(*args, **kwargs))

    def list(self, *args: Any, **kwargs: Any) -> Any:
        """List objects, one page (see :meth:`Client.list`)."""
        return self._run(self._client.list(*args, **kwargs))

    def list_all(self, *args: Any, **kwargs: Any) -> Any:
        """List every object, following the continue tokens (see :meth:`Client.list_all`)."""
        return self._run(self._client.list_all(*args, **kwargs))

    def create(self, *args: Any, **kwargs: Any) -> Any:
        """Create an object and return it as the server stored it (see :meth:`Client.create`)."""
        return self._run(self._client.create(*args, **kwargs))

    def update(self, *args: Any, **kwargs: Any) -> Any:
        """Replace an object (PUT; a stale resourceVersion raises Conflict) and return the stored one (see
        :meth:`Client.update`).
        """
        return self._run(self._client.update(*args, **kwargs))

    replace = update

    def update_status(self, *args: Any, **kwargs: Any) -> Any:
        """Replace an object's status subresource (see :meth:`Client.update_status`)."""
        return self._run(self._client.update_status(*args, **kwargs))

    def patch(self, *args: Any, **kwargs: Any) -> Any:
        """Patch an object (merge, strategic merge, JSON or apply patch) and return the result (see
        :meth:`Client.patch`).
        """
        return self._run(self._client.patch(*args, **kwargs))

    def apply(self, *args: Any, **kwargs: Any) -> Any:
        """Server-side apply an object as a field manager (see :meth:`Client.apply`)."""
        return self._run(self._client.apply(*args, **kwargs))

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        """Delete an object (see :meth:`Client.delete`)."""
        return self._run(self._client.delete(*args, **kwargs))

    def delete_collection(self, *args: Any, **kwargs: Any) -> Any:
        """Delete every object a selector matches (see :meth:`Client.delete_collection`)."""
        return self._run(self._client.delete_collection(*args, **kwargs))

    def get_scale(self, *args: Any, **kwargs: Any) -> Any:
        """Read an object's scale subresource (see :meth:`Client.get_scale`)."""
        return self._run(self._client.get_scale(*args, **kwargs))

    def scale(self, *args: Any, **kwargs: Any) -> Any:
        """Set an object's replicas through its scale subresource (see :meth:`Client.scale`)."""
        return self._run(self._client.scale(*args, **kwargs))

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[WatchEvent[Any]]:
        """A blocking iterator of watch events; ``break`` closes the stream."""
        stream = self._client.watch(*args, **kwargs)

        async def step() -> WatchEvent[Any]:
            return await stream.__anext__()

        try:
            while True:
                try:
                    yield self._run(step())
                except StopAsyncIteration:
                    return
        finally:
            if not self._closed:
                self._run(stream.aclose())

    def close(self) -> None:
        """Close the client and stop its event loop thread; closing twice does nothing."""
        if self._closed:
            return
        try:
            self._run(self._client.close())
        finally:
            self._closed = True
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

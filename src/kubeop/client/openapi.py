"""Fetching the server's OpenAPI v3 documents to build typed models (see kubeop.core.openapi).

One document per group version, fetched on the first model asked for from it and kept (with the
models built from it) for the life of the client. The index at ``/openapi/v3`` gives each
document's URL with a content hash, so a refreshed index after a CRD change points at new URLs.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl, urlsplit

from kubeop.client.transport import Transport
from kubeop.core.openapi import KubeModel, ModelFactory
from kubeop.core.request import ApiRequest
from kubeop.core.resource import ApiResource

__all__ = ["OpenAPIModels"]


class OpenAPIModels:
    """Typed models for served kinds, generated from the server's own schemas."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._factories: dict[str, ModelFactory] = {}
        self._models: dict[ApiResource, type[KubeModel]] = {}
        self._lock = asyncio.Lock()

    async def model_for(self, resource: ApiResource) -> type[KubeModel]:
        cached = self._models.get(resource)
        if cached is not None:
            return cached
        async with self._lock:
            cached = self._models.get(resource)
            if cached is not None:
                return cached
            key = f"apis/{resource.group}/{resource.version}" if resource.group else f"api/{resource.version}"
            factory = self._factories.get(key)
            if factory is None:
                factory = ModelFactory(await self._document(key))
                self._factories[key] = factory
            try:
                model = factory.model_for(resource.gvk)
            except LookupError:
                # A CRD changed after we fetched its document: fetch it again once.
                factory = self._factories[key] = ModelFactory(await self._document(key))
                model = factory.model_for(resource.gvk)
            model.__kube_resource__ = resource
            self._models[resource] = model
            return model

    async def _document(self, key: str) -> dict[str, object]:
        index = await self._transport.request(ApiRequest("GET", "/openapi/v3", target="OpenAPI v3 index"))
        entry = ((index or {}).get("paths") or {}).get(key)
        if not entry:
            raise LookupError(f"the server publishes no OpenAPI v3 document for {key}")
        url = urlsplit(str(entry.get("serverRelativeURL") or f"/openapi/v3/{key}"))
        req = ApiRequest("GET", url.path, tuple(parse_qsl(url.query)), target=f"OpenAPI v3 document {key}")
        doc = await self._transport.request(req)
        return doc if isinstance(doc, dict) else {}

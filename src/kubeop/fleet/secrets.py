"""Clusters from kubeconfig Secrets in a hub cluster (Cluster API's convention).

Cluster API writes each workload cluster's admin kubeconfig to a Secret ``<cluster>-kubeconfig``
(key ``value``, label ``cluster.x-k8s.io/cluster-name``). :class:`KubeconfigSecrets` watches such
Secrets: a cluster is engaged when its Secret appears, engaged again when the kubeconfig in it
changes (rotated credentials), and disengaged when the Secret goes.

A kubeconfig read from a Secret is untrusted input: whoever can write a Secret in that namespace
must not be able to make the operator run a program, read its own files, or talk to a server
it cannot authenticate. So only inline credentials are accepted: ``exec`` and ``auth-provider``
plugins, every file reference (``certificate-authority``, ``client-certificate``, ``client-key``,
``tokenFile``), ``proxy-url``, ``insecure-skip-tls-verify`` and a server that is not ``https://``
are refused with an error naming the Secret and the field. The YAML is parsed with bounds: UTF-8
only, no aliases, no duplicate keys, a bounded nesting depth and number of nodes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import yaml

from kubeop.cache import FuncHandler, SharedInformerFactory
from kubeop.client import Client, ClientConfig, ConfigError, load_config
from kubeop.client.kubeconfig import KubeConfig
from kubeop.core.resource import ApiResource
from kubeop.fleet._names import check_cluster_name
from kubeop.fleet.provider import Engagement

__all__ = ["KubeconfigSecrets", "kubeconfig_from_secret"]

log = logging.getLogger("kubeop.fleet")

SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
#: Cluster API's label naming the cluster a Secret belongs to.
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
_SUFFIX = "-kubeconfig"
#: A Secret holds at most 1 MiB; a kubeconfig larger than this is refused before parsing.
_MAX_KUBECONFIG = 1 << 20
#: A kubeconfig's YAML: how deep and how many nodes (a real one has a few hundred).
_MAX_DEPTH = 16
_MAX_EVENTS = 20_000
_READS_FILES = "it would read the operator's files or run a program"
_REFUSED = {
    "cluster": {
        "certificate-authority": _READS_FILES,
        "proxy-url": "it would send the cluster's traffic through a proxy the Secret chose",
        "insecure-skip-tls-verify": "the server would not be authenticated",
    },
    "user": dict.fromkeys(
        ("client-certificate", "client-key", "tokenFile", "exec", "auth-provider"), _READS_FILES
    ),
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FIX = {"cluster": "give certificate-authority-data", "user": "inline the credentials (user.*-data, token)"}


def _meta(secret: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = secret.get("metadata") if isinstance(secret, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _where(secret: Mapping[str, Any]) -> str:
    meta = _meta(secret)
    return f"Secret {str(meta.get('namespace', ''))[:253]}/{str(meta.get('name', ''))[:253]}"


def kubeconfig_from_secret(secret: Mapping[str, Any], *, key: str = "value") -> ClientConfig:
    """The ClientConfig of the kubeconfig in ``secret``'s ``data[key]`` (its current context).

    Raises ConfigError naming the Secret and what is wrong: the key missing, not base64, too
    large, not YAML, or asking for a file or a credential plugin (see the module docstring).
    """
    where = _where(secret)
    data = (secret.get("data") if isinstance(secret, Mapping) else None) or {}
    if not isinstance(data, Mapping) or key not in data:
        raise ConfigError(f"{where}: no data[{key!r}] holding a kubeconfig")
    raw = data[key]
    if not isinstance(raw, str):
        raise ConfigError(f"{where}: data[{key!r}] must be a base64 string, not {type(raw).__name__}")
    if len(raw) > _MAX_KUBECONFIG * 4 // 3 + 4:
        raise ConfigError(f"{where}: data[{key!r}] is larger than {_MAX_KUBECONFIG} bytes")
    try:
        text = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}: data[{key!r}] is not valid base64") from None
    parsed = _parse(text, f"{where}: data[{key!r}]")
    for section, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
        items = parsed.get(section) or []
        if not isinstance(items, list):
            continue  # KubeConfig names the error
        for item in items:
            body = item.get(inner) if isinstance(item, Mapping) else None
            if not isinstance(body, Mapping):
                continue
            entry = {"name": item.get("name"), **{f"{inner}.{k}": v for k, v in body.items()}}
            for field, value in entry.items():
                if isinstance(value, str) and _CONTROL.search(value):
                    # It would end up in a request line or header (a token with CR/LF adds headers).
                    raise ConfigError(
                        f"{where}: {section} entry {str(item.get('name'))[:80]!r}: {field} holds a control "
                        "character (CR, LF, NUL...): remove it"
                    )
            for field, why in _REFUSED.get(inner, {}).items():
                if body.get(field):
                    raise ConfigError(
                        f"{where}: {section} entry {str(item.get('name'))[:80]!r} sets {inner}.{field}, "
                        f"which a kubeconfig from a Secret may not ({why}): {_FIX[inner]}"
                    )
    config = KubeConfig.from_dict(parsed, path=where).client_config()
    url = urlsplit(config.server)
    if url.scheme != "https":
        raise ConfigError(
            f"{where}: the server of a kubeconfig from a Secret must be an https:// URL (its "
            "credentials would otherwise cross the network unprotected, to a server not authenticated)"
        )
    if url.query or url.fragment:
        # The server is logged and shown (engaging, errors): nothing may hide in it.
        raise ConfigError(
            f"{where}: the server URL may not have a query or a fragment: give scheme, host, port"
        )
    return config.with_options(qps=None)


_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader refusing duplicate keys (two parsers could read different kubeconfigs)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, list | dict) or key in seen:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"duplicate or unusable key at line {line}")
            seen.add(key)
        out: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return out


def _parse(text: bytes, what: str) -> Mapping[str, Any]:
    """The kubeconfig mapping in ``text``: UTF-8 YAML without aliases or duplicate keys, nested at
    most ``_MAX_DEPTH`` deep with at most ``_MAX_EVENTS`` nodes (checked from the parser's
    events before anything is built, so a hostile document costs little)."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} is not UTF-8 text") from None
    try:
        depth = 0
        for n, event in enumerate(yaml.parse(decoded, Loader=_Loader)):
            if isinstance(event, yaml.AliasEvent):
                raise ConfigError(
                    f"{what} uses a YAML alias (*{str(event.anchor)[:40]}): write the value out"
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > _MAX_DEPTH:
                    raise ConfigError(f"{what} is nested deeper than {_MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            if n > _MAX_EVENTS:
                raise ConfigError(f"{what} has more than {_MAX_EVENTS} YAML nodes")
        parsed = yaml.load(decoded, Loader=_StrictLoader)  # a safe loader, strict on keys
    except ConfigError as exc:
        if str(exc).startswith(what):
            raise
        raise ConfigError(f"{what}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{what} is not a YAML kubeconfig{at}") from None
    if not isinstance(parsed, Mapping):
        raise ConfigError(f"{what} must hold a kubeconfig mapping")
    return parsed


def cluster_name_of(secret: Mapping[str, Any]) -> str:
    """The cluster a kubeconfig Secret belongs to: its Cluster API label, or its name without
    ``-kubeconfig``."""
    meta = _meta(secret)
    labels = meta.get("labels") or {}
    name = labels.get(CLUSTER_NAME_LABEL) if isinstance(labels, Mapping) else None
    if not name:
        name = str(meta.get("name", ""))
        if name.endswith(_SUFFIX):
            name = name[: -len(_SUFFIX)]
    return check_cluster_name(name, where=_where(secret))


class KubeconfigSecrets:
    """Engages a cluster for each kubeconfig Secret in ``namespace`` of the hub cluster that
    matches ``label_selector`` (see the module docstring).

    Args:
        namespace: the hub namespace holding the Secrets.
        label_selector: which Secrets (default: every Secret with Cluster API's cluster-name label).
        key: the data key holding the kubeconfig (Cluster API: ``value``).
        hub: the hub cluster: a config (default: the kubeconfig or the in-cluster service
            account), or a client (not closed by the provider).
    """

    name = "kubeconfig secrets"

    def __init__(
        self,
        namespace: str,
        *,
        label_selector: str = CLUSTER_NAME_LABEL,
        key: str = "value",
        hub: ClientConfig | Client | None = None,
    ) -> None:
        self.namespace = namespace
        self.label_selector = label_selector
        self.key = key
        self._hub = hub
        # Which Secret engaged which cluster (a second Secret naming the same cluster is refused).
        self._owner: dict[str, str] = {}
        self._engaged: dict[str, str] = {}  # cluster -> resourceVersion of the kubeconfig engaged

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        """Watch the Secrets and engage, re-engage or disengage their clusters until ``stop``."""
        hub = self._hub
        api = hub if isinstance(hub, Client) else Client((hub or load_config()).with_options(qps=None))
        cache = SharedInformerFactory(api)
        changed: asyncio.Queue[str] = asyncio.Queue()
        informer = cache.informer(SECRETS, namespace=self.namespace, label_selector=self.label_selector)

        def note(obj: Any) -> None:
            changed.put_nowait(str((obj.get("metadata") or {}).get("name", "")))

        informer.add_event_handler(
            FuncHandler(
                on_add=lambda obj, _initial: note(obj),
                on_update=lambda _old, new: note(new),
                on_delete=lambda obj: note(getattr(obj, "obj", None) or obj),
            )
        )
        cache.start()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                getting = asyncio.ensure_future(changed.get())
                done, _ = await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if getting not in done:
                    getting.cancel()
                    break
                secret_name = getting.result()
                try:
                    await self._sync(
                        fleet, secret_name, lambda name: informer.store.get(f"{self.namespace}/{name}")
                    )
                except Exception as exc:  # one Secret never stops the provider (the other clusters)
                    log.error(
                        "kubeconfig Secret could not be synced: %s",
                        type(exc).__name__,
                        extra={"secret": f"{self.namespace}/{secret_name}"},
                    )
        finally:
            stopping.cancel()
            await cache.stop()
            if api is not hub:
                await api.close()

    async def _sync(self, fleet: Engagement, secret_name: str, lookup: Callable[[str], Any]) -> None:
        """Engage, re-engage or disengage the cluster of Secret ``secret_name`` (level-based: from
        what the cache holds now, ``lookup(name)``)."""
        secret = lookup(secret_name)
        owned = [c for c, s in self._owner.items() if s == secret_name]
        if secret is None:
            for cluster in owned:
                del self._owner[cluster]
                self._engaged.pop(cluster, None)
                log.info("cluster's kubeconfig Secret deleted: disengaging", extra={"cluster": cluster})
                await fleet.disengage(cluster)
            return
        try:
            cluster = cluster_name_of(secret)
            own = f"{cluster}{_SUFFIX}"
            if secret_name != own and _names(lookup(own), cluster):
                # Cluster API's <cluster>-kubeconfig is the cluster's own, whatever the order the
                # Secrets are seen in: another Secret naming it cannot take the cluster over.
                raise ConfigError(
                    f"{_where(secret)}: cluster {cluster!r} has its own Secret {self.namespace}/{own}; "
                    "another Secret may not name it"
                )
            holder = self._owner.get(cluster)
            if holder is not None and holder != secret_name and secret_name != own:
                raise ConfigError(
                    f"{_where(secret)}: cluster {cluster!r} is already engaged from Secret "
                    f"{self.namespace}/{holder}; one Secret per cluster"
                )
            config = kubeconfig_from_secret(secret, key=self.key)
        except Exception as exc:  # a Secret's content is untrusted: refuse it, whatever it broke
            why = str(exc) if isinstance(exc, ConfigError | ValueError | TypeError) else type(exc).__name__
            log.error(
                "kubeconfig Secret refused: %s", why, extra={"secret": f"{self.namespace}/{secret_name}"}
            )
            return
        for old in owned:  # the Secret now names another cluster
            if old != cluster:
                del self._owner[old]
                self._engaged.pop(old, None)
                await fleet.disengage(old)
        holder = self._owner.get(cluster)
        if holder is not None and holder != secret_name:
            log.warning(
                "cluster's own kubeconfig Secret replaces Secret %s/%s",
                self.namespace,
                holder,
                extra={"cluster": cluster, "secret": f"{self.namespace}/{secret_name}"},
            )
            self._engaged.pop(cluster, None)
        version = _data_version(secret, self.key)
        if self._engaged.get(cluster) == version:
            return  # a label or annotation changed, not the kubeconfig
        self._owner[cluster] = secret_name
        self._engaged[cluster] = version
        await fleet.engage(cluster, config)

    def __repr__(self) -> str:
        return f"KubeconfigSecrets(namespace={self.namespace!r}, label_selector={self.label_selector!r})"


def _names(secret: Any, cluster: str) -> bool:
    """Whether ``secret`` (None: absent) is a kubeconfig Secret of ``cluster``."""
    if secret is None:
        return False
    try:
        return cluster_name_of(secret) == cluster
    except (TypeError, ValueError):
        return False


def _data_version(secret: Mapping[str, Any], key: str) -> str:
    """What identifies the kubeconfig's content (not the Secret's resourceVersion, which also
    moves when a label changes)."""
    raw = str((secret.get("data") or {}).get(key, ""))
    return hashlib.sha256(raw.encode()).hexdigest()

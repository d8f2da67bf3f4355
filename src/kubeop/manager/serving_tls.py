"""A TLS context for the manager's HTTPS metrics when no certificate is given: a CA and a serving
certificate made at start, held in memory.

controller-runtime's metrics server does the same without a cert dir (a self-signed certificate
in memory); scrapers then skip verification (the ServiceMonitor's ``insecureSkipVerify``) and rely
on the bearer token for who they are, or the operator is given real certificates (cert-manager)
with a cert dir. The key never touches a disk: Python's ``ssl`` loads certificates from files
only, so on Linux it reads them from anonymous memory files (``memfd_create``), elsewhere from a
private temporary directory (0700) removed as soon as they are loaded. Nothing is written where a
read-only root filesystem would refuse it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SelfSigned", "self_signed"]

# A process that runs longer than this gets a certificate that has expired: a restart renews it.
VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class SelfSigned:
    """The server's TLS context and the CA that signed its certificate (PEM; for a client that
    wants to verify, e.g. a test)."""

    context: ssl.SSLContext = field(repr=False)
    ca_pem: bytes = field(repr=False)
    hosts: tuple[str, ...]


def self_signed(hosts: Sequence[str] = ()) -> SelfSigned:
    """A new CA and serving certificate for ``hosts`` plus localhost, 127.0.0.1, ::1 and this
    machine's host name (the pod's name), loaded into a server context (TLS 1.2 or later)."""
    from kubeop.webhook.certs import make_ca, make_serving  # cryptography: only when used

    names = [h for h in (*hosts, "localhost", "127.0.0.1", "::1", socket.gethostname()) if h]
    names = [h for h in dict.fromkeys(names) if h not in ("0.0.0.0", "::", "*")]
    ca = make_ca(VALIDITY)
    serving = make_serving(ca, names, VALIDITY)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION
    context.set_alpn_protocols(["http/1.1"])
    with _files(serving.cert_pem + ca.cert_pem, serving.key_pem) as (cert_file, key_file):
        context.load_cert_chain(cert_file, key_file)
    return SelfSigned(context, ca.cert_pem, tuple(names))


@contextlib.contextmanager
def _files(cert: bytes, key: bytes) -> Iterator[tuple[str, str]]:
    """Two readable paths holding ``cert`` and ``key`` for as long as the block runs."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fds: list[int] = []
        try:
            for data in (cert, key):
                fd = os.memfd_create("kubeop-metrics-tls", os.MFD_CLOEXEC)
                fds.append(fd)
                _write_all(fd, data)
            yield f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"
            return
        except OSError:
            if len(fds) == 2:  # the files were made: the failure was loading them
                raise
        finally:
            for fd in fds:
                os.close(fd)
    with tempfile.TemporaryDirectory(prefix="kubeop-metrics-tls-") as directory:  # mode 0700
        paths = []
        for name, data in (("tls.crt", cert), ("tls.key", key)):
            path = Path(directory) / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            paths.append(str(path))
        yield paths[0], paths[1]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

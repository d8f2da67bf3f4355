"""Helpers for the example operators' end-to-end tests: a real SMTP server on loopback, the
hostPath provisioner next to the operator under test, Events and leftovers."""

from __future__ import annotations

import contextlib
import email
import socket
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.controller import Controller as SMTPController
from examples.hostpath_provisioner.provisioner import controllers as provisioner_controllers

from kubeop.client import Client
from kubeop.controller import Controller
from kubeop.core.errors import NotFound
from kubeop.manager import Manager, Serving
from tests.e2e.controller.conftest import client_for, running


@dataclass
class Received:
    subject: str
    message_id: str
    to: str
    body: str


@dataclass
class MailServer:
    """aiosmtpd on 127.0.0.1 that keeps what it receives; ``stop``/``start`` make an outage."""

    port: int = 0
    mails: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _smtp: SMTPController | None = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.original_content or envelope.content)
        with self._lock:
            self.mails.append(
                Received(str(msg["Subject"]), str(msg["Message-ID"]), str(msg["To"]), msg.get_payload())
            )
        return "250 OK"

    def start(self) -> None:
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        self._smtp = SMTPController(self, hostname="127.0.0.1", port=self.port)
        self._smtp.start()

    def stop(self) -> None:
        if self._smtp is not None:
            self._smtp.stop()
            self._smtp = None

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.mails)


@contextlib.contextmanager
def mail_server() -> Any:
    server = MailServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def operator(kubeconfig: str, name: str, controllers: Sequence[Controller]) -> AsyncIterator[Client]:
    """Run ``controllers`` and the hostPath provisioner in one Manager (its own client) until exit."""
    async with client_for(kubeconfig) as client:
        manager = Manager(client, name=name, serving=Serving(metrics_address=None, health_address=None))
        for c in [*controllers, *provisioner_controllers()]:
            manager.add(c)
        async with running(manager):
            yield client


async def events(client: Client, namespace: str, reason: str) -> list[dict[str, Any]]:
    listed = await client.list("events.events.k8s.io", namespace=namespace)
    return [e for e in listed.items if e.get("reason") == reason]


async def gone(client: Client, res: Any, name: str, namespace: str | None) -> bool:
    try:
        await client.get(res, name, namespace=namespace)
    except NotFound:
        return True
    return False

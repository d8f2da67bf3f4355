"""Mail through SMTP, with the retry schedule the controller keeps on the cluster.

``smtplib`` runs in a worker thread (it blocks) with a timeout, so an SMTP server that hangs
costs a thread for ``timeout`` seconds and never the event loop. Every mail carries a
Message-ID made of the MySQL's uid and the notification's id, so a mail sent again after a
crash between "SMTP accepted it" and "the status says so" is recognisable as the same mail.
Within one process that window is closed too: ids sent but not yet recorded are remembered, and
not sent again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import smtplib
import time
from dataclasses import dataclass, field
from email.message import EmailMessage

__all__ = ["Mail", "Mailer"]


@dataclass(frozen=True)
class Mail:
    to: tuple[str, ...]
    subject: str
    body: str
    message_id: str


@dataclass
class Mailer:
    """Where mails go, and how a failed one is retried (``backoff`` doubling up to ``backoff_cap``)."""

    host: str
    port: int = 25
    sender: str = "mysql-operator@localhost"
    timeout: float = 5.0
    backoff: float = 1.0
    backoff_cap: float = 300.0
    _sent: dict[str, float] = field(default_factory=dict, repr=False)

    def delay(self, attempts: int) -> float:
        """Seconds before the next attempt after ``attempts`` failures (>= 1)."""
        return float(min(self.backoff * 2 ** max(attempts - 1, 0), self.backoff_cap))

    def already_sent(self, message_id: str) -> bool:
        return message_id in self._sent

    async def send(self, mail: Mail) -> None:
        """Deliver one mail; raises OSError / smtplib.SMTPException when SMTP does not take it."""
        if mail.message_id in self._sent:
            return
        await asyncio.to_thread(self._send, mail)
        now = time.monotonic()
        self._sent[mail.message_id] = now
        if len(self._sent) > 10_000:
            self._sent = {k: t for k, t in self._sent.items() if now - t < 3600}

    def forget(self, message_id: str) -> None:
        """The status records the mail: the cluster remembers it from now on."""
        self._sent.pop(message_id, None)

    def _send(self, mail: Mail) -> None:
        msg = EmailMessage()
        msg["From"] = self.sender
        msg["To"] = ", ".join(mail.to)
        msg["Subject"] = mail.subject
        msg["Date"] = email.utils.format_datetime(dt.datetime.now(dt.UTC))
        msg["Message-ID"] = mail.message_id
        msg.set_content(mail.body)
        with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
            smtp.send_message(msg)

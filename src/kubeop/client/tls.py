"""TLS set-up: one ssl.SSLContext per client, built once from the config.

The CA is loaded from memory (``cadata``). Python's ``load_cert_chain`` only reads files, so an
inline client certificate and key are written to a private temporary directory (mode 0700, files
0600), loaded, and deleted before this function returns; the key never outlives the call on disk.
Certificates are checked for expiry up front so an expired client certificate is reported as
such, naming the config, instead of as an opaque handshake failure. The check reads the validity
dates with a few lines of DER parsing; ``cryptography`` (~8 MB of RSS) is imported only to word
the error for a certificate that fails the check or does not parse.
"""

from __future__ import annotations

import binascii
import datetime
import os
import ssl

from kubeop.client.config import ClientConfig, ConfigError

__all__ = ["ssl_context"]


def _read(path: str, what: str, source: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"{source}: cannot read {what} {path}: {e.strerror}") from None


def _der_header(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at ``pos``."""
    tag, length = der[pos], der[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if not 0 < n <= 4:
            raise ValueError("unsupported DER length")
        length = int.from_bytes(der[pos : pos + n], "big")
        pos += n
    if pos + length > len(der):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _der_time(der: bytes, tag: int, start: int, end: int) -> datetime.datetime:
    text = der[start:end].decode("ascii")
    if tag == 0x17:  # UTCTime YYMMDDHHMMSSZ; RFC 5280: YY >= 50 is 19YY
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18:  # GeneralizedTime YYYYMMDDHHMMSSZ
        raise ValueError("not a DER time")
    if len(text) != 15 or text[-1] != "Z":
        raise ValueError("not a UTC time with seconds")
    return datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=datetime.UTC)


def _cert_validity(cert_pem: bytes) -> tuple[datetime.datetime, datetime.datetime]:
    """(notBefore, notAfter) of the first certificate in ``cert_pem``; ValueError if malformed.

    Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
    signature, issuer, validity SEQUENCE { notBefore, notAfter }, ... }, ... } (RFC 5280).
    """
    begin, end = b"-----BEGIN CERTIFICATE-----", b"-----END CERTIFICATE-----"
    i = cert_pem.find(begin)
    j = cert_pem.find(end, i)
    if i < 0 or j < 0:
        raise ValueError("no PEM certificate")
    try:
        der = binascii.a2b_base64(cert_pem[i + len(begin) : j])
        tag, pos, _ = _der_header(der, 0)  # Certificate
        if tag != 0x30:
            raise ValueError("not a certificate")
        tag, pos, _ = _der_header(der, pos)  # tbsCertificate
        if tag != 0x30:
            raise ValueError("not a certificate")
        if der[pos] == 0xA0:  # explicit version
            pos = _der_header(der, pos)[2]
        for _ in range(3):  # serialNumber, signature, issuer
            pos = _der_header(der, pos)[2]
        tag, pos, _ = _der_header(der, pos)  # validity
        if tag != 0x30:
            raise ValueError("no validity")
        tag, start, stop = _der_header(der, pos)
        not_before = _der_time(der, tag, start, stop)
        tag, start, stop = _der_header(der, stop)
        return not_before, _der_time(der, tag, start, stop)
    except (IndexError, UnicodeDecodeError, binascii.Error) as e:
        raise ValueError(f"malformed certificate: {e}") from None


def _check_not_expired(cert_pem: bytes, source: str) -> None:
    try:
        not_before, not_after = _cert_validity(cert_pem)
        now = datetime.datetime.now(datetime.UTC)
        if not_before <= now <= not_after:
            return  # the common case: no cryptography import
    except ValueError:
        pass  # let cryptography judge and word it
    _explain_bad_cert(cert_pem, source)


def _explain_bad_cert(cert_pem: bytes, source: str) -> None:
    # Imported here: cryptography costs ~8 MB of RSS, paid only when a certificate is rejected.
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise ConfigError(f"{source}: the client certificate is not a valid PEM certificate") from None
    now = datetime.datetime.now(datetime.UTC)
    if cert.not_valid_after_utc < now:
        raise ConfigError(
            f"{source}: the client certificate ({cert.subject.rfc4514_string()}) expired at "
            f"{cert.not_valid_after_utc.isoformat()}"
        )
    if cert.not_valid_before_utc > now:
        raise ConfigError(
            f"{source}: the client certificate is not valid before {cert.not_valid_before_utc.isoformat()}"
        )


def ssl_context(config: ClientConfig, client_cert: tuple[bytes, bytes] | None = None) -> ssl.SSLContext:
    """The SSLContext for ``config``; ``client_cert`` (PEM cert, key) overrides the config's pair.

    Raises :class:`ConfigError` naming the config source for unreadable, malformed or expired
    material.
    """
    source = config.source
    # PROTOCOL_TLS_CLIENT verifies certificates and host names by default.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if config.insecure_skip_tls_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ca = config.ca_data if config.ca_data else None
        if ca is None and config.ca_file:
            ca = _read(config.ca_file, "certificate-authority", source)
        if ca is None:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        else:
            # A configured CA is the only trust root (as in client-go): the system store is not
            # consulted, so a public CA cannot vouch for a cluster's API server.
            try:
                ctx.load_verify_locations(cadata=ca.decode("ascii", "replace"))
            except ssl.SSLError as e:
                raise ConfigError(f"{source}: certificate-authority is not valid PEM: {e.reason}") from None
    if client_cert is None:
        cert = config.client_cert_data
        if cert is None and config.client_cert_file:
            cert = _read(config.client_cert_file, "client-certificate", source)
        key = config.client_key_data
        if key is None and config.client_key_file:
            key = _read(config.client_key_file, "client-key", source)
        if cert is not None and key is not None:
            client_cert = (cert, key)
    if client_cert is not None:
        _check_not_expired(client_cert[0], source)
        _load_pair(ctx, client_cert, source)
    return ctx


def _load_pair(ctx: ssl.SSLContext, pair: tuple[bytes, bytes], source: str) -> None:
    import tempfile  # here: an in-cluster (token) client never needs it

    with tempfile.TemporaryDirectory(prefix="kubeop-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert_path = os.path.join(tmp, "client.crt")
        key_path = os.path.join(tmp, "client.key")
        for path, data in ((cert_path, pair[0]), (key_path, pair[1])):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as e:
            raise ConfigError(
                f"{source}: client certificate and key do not load ({e.reason}); "
                "is the key the one for this certificate?"
            ) from None

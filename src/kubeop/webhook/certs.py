"""Certificates for serving webhooks: a CA and a serving certificate, the checks a pair must pass,
and the cert dir they are read from.

The API server needs the CA (the configurations' ``caBundle``) and the webhook server needs the
serving pair, written as ``tls.crt`` / ``tls.key`` (controller-runtime's names, and a
kubernetes.io/tls Secret's keys) next to ``ca.crt``. :func:`local_certificates` reuses what a
directory already holds while it is valid for the hosts and for another day, so restarting a
local operator does not invalidate the caBundle already registered with the cluster.

Without a directory, :func:`default_cert_dir` is used: a directory of this user's own (0700,
checked, never a symlink) rather than one fixed path in the shared temp dir, where another local
user could create it first to read the key or plant a CA. Files are read with
:func:`read_cert_file`: regular files only (a FIFO planted there cannot block the reader), opened
without following a symlink out of the directory (a Secret mounted by kubelet is a set of
symlinks into ``..data/`` inside it, which stays readable).

ECDSA P-256: key generation takes microseconds, and kube-apiserver accepts it. Pairs made
elsewhere may be RSA (2048 bits or more) or ECDSA P-256/P-384/P-521. Cluster deployments get
their certificates from cert-manager, or keep them in a Secret with
:mod:`kubeop.webhook.rotator`, which makes them with :func:`make_ca` and :func:`make_serving`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import ipaddress
import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubeop.core import pki
from kubeop.core.pki import CLOCK_SKEW, PrivateKey

__all__ = [
    "CertPathError",
    "KeyPair",
    "LocalCertificates",
    "ca_problem",
    "checked_cert_path",
    "default_cert_dir",
    "issue_serving",
    "load_key",
    "local_certificates",
    "make_ca",
    "make_serving",
    "read_cert_file",
    "serving_problem",
]

CERT_NAME, KEY_NAME, CA_NAME, CA_KEY_NAME = "tls.crt", "tls.key", "ca.crt", "ca.key"
CA_COMMON_NAME = "kubeop-webhook-ca"
_MAX_FILE = 1 << 20  # a certificate chain or a key is a few KiB
_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)  # what Go's crypto/tls accepts
_WEAK_HASHES = (hashes.SHA1, hashes.MD5)  # Go refuses SHA-1 signatures (Go 1.18)
_NOT_REGULAR = (
    "{path} is not a regular file (a FIFO, a device, a directory?): remove it and put the PEM file there"
)
_KEY_ADVICE = "use RSA (2048 bits or more) or ECDSA P-256, P-384 or P-521"


class CertPathError(Exception):
    """A cert dir, or a file in it, that is not safe to use (names the path and the fix).

    Not an OSError: callers that treat a missing or unreadable file as "make a new one" must
    not treat a planted one the same way.
    """


# -- the cert dir ---------------------------------------------------------------------------------


def default_cert_dir() -> Path:
    """The cert dir of a local operator given none, created when missing and checked.

    ``$XDG_RUNTIME_DIR/kubeop/webhook-certs`` when that runtime directory is this user's own
    (0700, not a symlink), else ``<temp dir>/kubeop-<uid>/webhook-certs``. Each level is created
    0700 and then checked on an open descriptor (no symlink followed): a directory, owned by this
    user, with no access for others; anything else raises :class:`CertPathError` naming it (in
    the shared temp dir, someone else may have created it first). The temp dir itself must be
    sticky if others may write to it, so nobody else can rename our directory away.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and _private_problem(Path(runtime)) is None:
        base = Path(runtime) / "kubeop"
    else:
        base = Path(tempfile.gettempdir()) / f"kubeop-{os.geteuid()}"
        _check_shared_parent(base.parent)
    directory = base / "webhook-certs"
    for level in (base, directory):
        _make_private(level)
    return directory


def _check_shared_parent(parent: Path) -> None:
    try:
        mode = os.stat(parent).st_mode
    except OSError as exc:
        raise CertPathError(f"the temp dir {parent} is not usable for webhook certificates: {exc}") from exc
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise CertPathError(
            f"the temp dir {parent} is writable by other users and not sticky (mode {stat.S_IMODE(mode):o}): "
            "others could replace the webhook cert dir in it; set TMPDIR to a directory of your own, or "
            "give a cert dir (--webhook-cert-dir / webhook_cert_dir=)"
        )


def _make_private(path: Path) -> None:
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    problem = _private_problem(path)
    if problem is not None:
        raise CertPathError(
            f"refusing the webhook cert dir {path}: {problem}; another local user may have made it to "
            f"read the webhook key or plant a CA. Remove it (it is re-created 0700), or give a cert "
            "dir of your own (--webhook-cert-dir / webhook_cert_dir=)"
        )


def _private_problem(path: Path) -> str | None:
    """Why ``path`` is not a directory of this user's only (None: it is one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:  # ELOOP: a symlink, ENOTDIR: a file
        return f"it is not a directory of its own (a symlink or a file?): {exc.strerror}"
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()})"
    if st.st_mode & 0o077:
        return f"its mode is {stat.S_IMODE(st.st_mode):o}: others may use it (it must be 700)"
    return None


# -- reading the files ----------------------------------------------------------------------------


def _open_regular(directory: Path, name: str, follow_links: bool) -> tuple[int, Path]:
    """An open descriptor on the regular file ``directory/name`` and its real path.

    ``follow_links`` False: a symlink there is refused. True: followed only while it stays inside
    the directory (kubelet's ``tls.crt -> ..data/tls.crt``). Opened non-blocking, so a FIFO
    returns at once and is refused, as is anything else but a regular file.
    """
    path = directory / name
    target = path
    if follow_links:
        real, root = Path(os.path.realpath(path)), Path(os.path.realpath(directory))
        if root not in real.parents:
            raise CertPathError(
                f"{path} leads to {real}, outside {directory}: a cert dir's files stay inside it; "
                "replace the link with the file"
            )
        target = real
    link = f"{path} is a symlink, not followed in this cert dir: replace it with the file"
    with contextlib.suppress(FileNotFoundError):  # missing: os.open says so below
        mode = os.lstat(target).st_mode
        if stat.S_ISLNK(mode):
            raise CertPathError(link)
        if not stat.S_ISREG(mode):  # not even opened: a device may act on an open
            raise CertPathError(_NOT_REGULAR.format(path=path))
    try:  # the checks above are advice; these on the descriptor are the ones that hold
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise CertPathError(link) from exc
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CertPathError(_NOT_REGULAR.format(path=path))
        if st.st_size > _MAX_FILE:
            raise CertPathError(f"{path} is {st.st_size} bytes: a PEM file this large is not a certificate")
    except BaseException:
        os.close(fd)
        raise
    return fd, target


def read_cert_file(directory: str | os.PathLike[str], name: str, *, follow_links: bool = True) -> bytes:
    """The content of ``directory/name``, a regular file in the directory.

    OSError when it is missing or unreadable; :class:`CertPathError` when it is something else
    (a FIFO, a device, a symlink leaving the directory or, with ``follow_links`` False, any
    symlink). Never blocks on a FIFO.
    """
    fd, _ = _open_regular(Path(directory), name, follow_links)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(_MAX_FILE + 1)
    if len(data) > _MAX_FILE:
        raise CertPathError(f"{Path(directory) / name} is over {_MAX_FILE} bytes: not a certificate")
    return data


def checked_cert_path(directory: str | os.PathLike[str], name: str, *, follow_links: bool = True) -> Path:
    """The real path of ``directory/name`` once checked as :func:`read_cert_file` checks it, for
    readers that need a path (``ssl.SSLContext.load_cert_chain``)."""
    fd, real = _open_regular(Path(directory), name, follow_links)
    os.close(fd)
    return real


# -- checks -------------------------------------------------------------------------------------


def load_key(pem: bytes, what: str = "the key") -> PrivateKey:
    """A private key from PEM: RSA of 2048 bits or more, or ECDSA on a curve TLS peers accept."""
    try:
        key = serialization.load_pem_private_key(pem, None)
    except TypeError as exc:  # encrypted
        raise ValueError(f"{what} is encrypted: give it without a password") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"{what} is not a PEM private key") from exc
    if not isinstance(key, PrivateKey):
        raise ValueError(f"{what} is a {type(key).__name__.removeprefix('_')}: {_KEY_ADVICE}")
    problem = _strength(key.public_key(), what)
    if problem is not None:
        raise ValueError(problem)
    return key


def _strength(public: object, what: str) -> str | None:
    if isinstance(public, rsa.RSAPublicKey):
        if public.key_size < 2048:
            return f"{what} is a {public.key_size}-bit RSA key: {_KEY_ADVICE}"
        return None
    if isinstance(public, ec.EllipticCurvePublicKey):
        if not isinstance(public.curve, _CURVES):
            return f"{what} is an ECDSA key on {public.curve.name}: {_KEY_ADVICE}"
        return None
    return f"{what} is a {type(public).__name__.removeprefix('_')}: {_KEY_ADVICE}"


def _spki(public: CertificatePublicKeyTypes) -> bytes:
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _when(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _validity(cert: x509.Certificate, what: str, now: dt.datetime) -> str | None:
    if cert.not_valid_before_utc > now + CLOCK_SKEW:
        return f"{what} is not valid before {_when(cert.not_valid_before_utc)} (now: {_when(now)})"
    if cert.not_valid_after_utc <= now:
        return f"{what} expired at {_when(cert.not_valid_after_utc)}"
    return None


def ca_problem(cert: x509.Certificate, *, now: dt.datetime | None = None, what: str = "the CA") -> str | None:
    """Why ``cert`` cannot be the CA of a serving certificate (None: it can).

    basicConstraints CA:TRUE; a keyUsage, when there is one, with keyCertSign (without one the key
    is unrestricted, as RFC 5280 and Go read it); valid now (with :data:`CLOCK_SKEW`); a key of
    an accepted kind and size.
    """
    now = now or dt.datetime.now(dt.UTC)
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    subject = cert.subject.rfc4514_string()
    if constraints is None or not constraints.ca:
        return f"{what} ({subject}) is not a CA: it has no basicConstraints CA:TRUE"
    with contextlib.suppress(x509.ExtensionNotFound):
        if not cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign:
            return f"{what} ({subject}) may not sign certificates: its keyUsage lacks keyCertSign"
    return _validity(cert, what, now) or _strength(cert.public_key(), f"{what}'s key")


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def _names(cert: x509.Certificate) -> tuple[list[str], list[ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return [n.lower().rstrip(".") for n in san.get_values_for_type(x509.DNSName)], [
        ip
        for ip in san.get_values_for_type(x509.IPAddress)
        if not isinstance(ip, ipaddress.IPv4Network | ipaddress.IPv6Network)
    ]


def _covers(cert: x509.Certificate, host: str) -> bool:
    """Whether a TLS client dialing ``host`` accepts ``cert``'s subjectAltNames (Go's rules: an IP
    matches an IP entry, a name a DNS entry exactly or by a wildcard for its first label)."""
    dns, ips = _names(cert)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        name = host.lower().rstrip(".")
        label, _, rest = name.partition(".")
        return name in dns or (bool(label) and bool(rest) and f"*.{rest}" in dns)
    return ip in ips


def serving_problem(
    cert: x509.Certificate,
    key_pem: bytes,
    ca: x509.Certificate,
    hosts: Sequence[str],
    *,
    now: dt.datetime | None = None,
) -> str | None:
    """Why ``cert`` with the key ``key_pem`` cannot serve ``hosts`` to clients trusting ``ca``
    (None: it can). Each check names what failed: the key (kind, size, that it is the
    certificate's), the signature of ``ca`` (with a hash the API server accepts), validity now,
    extendedKeyUsage serverAuth (when the certificate restricts it), subjectAltNames for each host.
    """
    now = now or dt.datetime.now(dt.UTC)
    try:
        key = load_key(key_pem, "tls.key")
    except ValueError as exc:
        return str(exc)
    if _spki(key.public_key()) != _spki(cert.public_key()):
        return "tls.key is not the key of tls.crt"
    if not _issued_by(cert, ca):
        return f"tls.crt is not signed by the CA in ca.crt ({ca.subject.rfc4514_string()})"
    if isinstance(cert.signature_hash_algorithm, _WEAK_HASHES):
        return f"tls.crt is signed with {cert.signature_hash_algorithm.name}: the API server refuses it"
    problem = _validity(cert, "tls.crt", now)
    if problem is not None:
        return problem
    with contextlib.suppress(x509.ExtensionNotFound):
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        if not {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE} & set(usages):
            return "tls.crt may not serve TLS: its extendedKeyUsage lacks serverAuth"
    missing = [host for host in hosts if not _covers(cert, host)]
    if missing:
        return f"tls.crt is not for {', '.join(missing)} (its subjectAltNames: {_shown(cert)})"
    return None


def _shown(cert: x509.Certificate) -> str:
    dns, ips = _names(cert)
    return ", ".join([*dns, *map(str, ips)]) or "none"


# -- making them --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalCertificates:
    directory: Path
    ca_pem: bytes

    @property
    def cert_file(self) -> Path:
        """The serving certificate's file (``tls.crt``) in the directory."""
        return self.directory / CERT_NAME

    @property
    def key_file(self) -> Path:
        """The serving key's file (``tls.key``) in the directory."""
        return self.directory / KEY_NAME


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write via a temporary file of its own and rename, so a reader never sees half a file and
    writers at once (two local operators on one directory) never take each other's file away.
    The rename replaces whatever was there (a symlink or a FIFO too) without opening it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True)
class KeyPair:
    """A private key and its certificate, both PEM (the key stays out of the repr)."""

    key_pem: bytes = field(repr=False)
    cert_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def key(self) -> PrivateKey:
        """The private key (RSA or ECDSA, see :func:`load_key`); ValueError naming what is wrong."""
        return load_key(self.key_pem)

    def matches(self) -> bool:
        """Whether the key is the certificate's (False too when either does not load)."""
        try:
            return _spki(self.key().public_key()) == _spki(self.cert.public_key())
        except ValueError:
            return False


def make_ca(validity: dt.timedelta = dt.timedelta(days=3650)) -> KeyPair:
    """A new self-signed CA (in memory)."""
    key = pki.new_key()
    cert = pki.self_signed_ca(key, CA_COMMON_NAME, validity, path_length=0)
    return KeyPair(pki.key_pem(key), cert.public_bytes(serialization.Encoding.PEM))


def make_serving(
    ca: KeyPair, hosts: Sequence[str], validity: dt.timedelta = dt.timedelta(days=365)
) -> KeyPair:
    """A new serving certificate for ``hosts`` (IP addresses or DNS names) signed by ``ca``."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    key, cert = pki.issue(ca.key(), ca.cert, hosts[0], validity, hosts=hosts, server=True)
    return KeyPair(pki.key_pem(key), cert.public_bytes(serialization.Encoding.PEM))


def _directory_ca(directory: Path, follow_links: bool) -> KeyPair | None:
    """The directory's CA when its key is its certificate's and it may sign, else None; missing
    or unparsable files are None, a planted file (FIFO, link out) is :class:`CertPathError`."""
    try:
        ca = KeyPair(
            read_cert_file(directory, CA_KEY_NAME, follow_links=follow_links),
            read_cert_file(directory, CA_NAME, follow_links=follow_links),
        )
        if ca.matches() and ca_problem(ca.cert) is None:
            return ca
    except (OSError, ValueError):
        pass
    return None


def _issue(directory: Path, hosts: Sequence[str], days: float, follow_links: bool) -> LocalCertificates:
    ca = _directory_ca(directory, follow_links)
    if ca is None:
        ca = make_ca()
        _write(directory / CA_KEY_NAME, ca.key_pem, 0o600)
        _write(directory / CA_NAME, ca.cert_pem)
    serving = make_serving(ca, hosts, dt.timedelta(days=days))
    # The key first: a server that sees the new certificate with the old key fails to load the
    # pair and keeps serving the old one until both are in place.
    _write(directory / KEY_NAME, serving.key_pem, 0o600)
    _write(directory / CERT_NAME, serving.cert_pem)
    return LocalCertificates(directory, ca.cert_pem)


def issue_serving(
    directory: str | os.PathLike[str],
    hosts: Sequence[str] = ("127.0.0.1",),
    *,
    days: float = 365,
) -> LocalCertificates:
    """A new serving certificate for ``hosts`` from the directory's CA (created if missing).

    Rotation is this call: the webhook server notices the new files on its next handshake.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return _issue(directory, hosts, days, follow_links=True)


def local_certificates(
    directory: str | os.PathLike[str] | None = None, hosts: Sequence[str] = ("127.0.0.1",)
) -> LocalCertificates:
    """The directory's CA and serving certificate, issued when missing, expiring, for other hosts
    or failing a check of :func:`serving_problem`.

    ``directory`` None: :func:`default_cert_dir`, where no symlink is followed at all. A given
    directory is the caller's choice: symlinks in it are followed while they stay inside it.
    Either way a file that is not a regular one raises :class:`CertPathError`.
    """
    follow_links = directory is not None
    where = Path(directory) if directory is not None else default_cert_dir()
    with contextlib.suppress(OSError, ValueError):
        ca_pem = read_cert_file(where, CA_NAME, follow_links=follow_links)
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert = x509.load_pem_x509_certificate(read_cert_file(where, CERT_NAME, follow_links=follow_links))
        key_pem = read_cert_file(where, KEY_NAME, follow_links=follow_links)
        now = dt.datetime.now(dt.UTC)
        fresh = cert.not_valid_after_utc > now + dt.timedelta(days=1)
        if (
            fresh
            and ca_problem(ca, now=now) is None
            and serving_problem(cert, key_pem, ca, hosts, now=now) is None
        ):
            return LocalCertificates(where, ca_pem)
    if directory is not None:
        where.mkdir(parents=True, exist_ok=True)
    return _issue(where, hosts, 365, follow_links)

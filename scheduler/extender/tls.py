"""Who may call the extender: kube-scheduler, proven by its client certificate (mTLS).

kube-scheduler's extender entry (KubeSchedulerConfiguration v1 ``extenders[]``) can speak HTTPS
(``enableHTTPS``) and present a client certificate (``tlsConfig.certFile``/``keyFile``, checking
the extender's with ``caFile``); it has no bearer-token field. So the extender authenticates its
caller by certificate:

- ``--tls-dir DIR``: HTTPS with ``DIR/tls.crt`` and ``tls.key``; the handshake fails for a client
  without a certificate signed by ``DIR/ca.crt`` (or ``--client-ca``), and ``--client-name``
  narrows the accepted certificates to those naming it (common name or DNS name).
- Without it, plain HTTP, and only on a loopback address: refused anywhere else.
- ``--issue-certs DIR`` writes a fresh set for one Pod (deploy/: an init container of the
  scheduler Pod, whose kube-scheduler and extender containers both mount DIR): a CA whose key is
  never written, the extender's serving certificate for 127.0.0.1, and kube-scheduler's client
  certificate. Only the Pod's containers can read them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduler.errors import UserError
from scheduler.extender.config import CA_FILE, CERT_FILE, CLIENT_CERT_FILE, CLIENT_KEY_FILE, KEY_FILE
from scheduler.http.limits import is_loopback
from scheduler.http.pki import cert_pem, issue_ca, issue_client, issue_serving, key_pem

SCHEDULER_CLIENT_NAME = "toposched-scheduler"
# The set lives as long as its Pod; its CA key is gone once issued, so nothing else can be signed
# by it, and a long validity only spares a long-running Pod an expiry.
POD_CERT_VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True)
class ExtenderTLS:
    cert_file: Path
    key_file: Path
    client_ca_file: Path
    client_names: frozenset[str] = frozenset()

    @classmethod
    def from_dir(cls, directory: Path, client_ca: Path | None = None, client_names: Iterable[str] = ()) -> ExtenderTLS:
        return cls(directory / CERT_FILE, directory / KEY_FILE, client_ca or directory / CA_FILE,
                   frozenset(client_names))

    def server_context(self) -> ssl.SSLContext:
        """TLS >= 1.2; a client certificate signed by the client CA is required."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"--tls-dir: cannot load {self.cert_file} and {self.key_file} ({exc})") from exc
        try:
            ctx.load_verify_locations(cafile=str(self.client_ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise UserError(f"cannot load the client CA {self.client_ca_file} ({exc})") from exc
        ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def allows(self, sock: Any) -> bool:
        """After the handshake (the certificate is verified): does it name an allowed client?"""
        if not self.client_names:
            return True
        return bool(peer_names(sock.getpeercert() or {}) & self.client_names)


def peer_names(cert: dict[str, Any]) -> set[str]:
    """The common names and DNS names of a verified peer certificate (``SSLSocket.getpeercert``)."""
    names = {value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names |= {value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"}
    return names


def unauthenticated_bind_error(bind: str, tls: bool) -> str | None:
    """The one line refusing plain HTTP on a non-loopback address, or None."""
    if tls or is_loopback(bind):
        return None
    return (f"refusing to serve the extender on {bind} without client authentication: whoever reaches it could "
            "have pods bound and slots held; give --tls-dir DIR (HTTPS that serves only kube-scheduler's client "
            "certificate, docs/extender.md) or keep the default --bind 127.0.0.1 (a sidecar of kube-scheduler)")


def issue_pod_certificates(directory: Path, client_name: str = SCHEDULER_CLIENT_NAME,
                           validity: dt.timedelta = POD_CERT_VALIDITY) -> None:
    """Write ca.crt, tls.crt/tls.key (the extender, 127.0.0.1) and client.crt/client.key (kube-scheduler)."""
    ca = issue_ca(validity, purpose="extender")
    serving = issue_serving(ca, ["localhost"], [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")],
                            validity)
    client = issue_client(ca, client_name, validity)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data, private in ((CA_FILE, cert_pem(ca.cert), False), (CERT_FILE, cert_pem(serving.cert), False),
                                (KEY_FILE, key_pem(serving.key), True),
                                (CLIENT_CERT_FILE, cert_pem(client.cert), False),
                                (CLIENT_KEY_FILE, key_pem(client.key), True)):
        _write(directory / name, data, 0o600 if private else 0o644)


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)

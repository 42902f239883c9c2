"""Self-signed CA and serving certificate for the webhook, rotated before they expire.

* The CA (default validity 1 year) and the serving certificate (default 90 days) are
  written to ``--cert-dir`` as ``ca.crt``/``ca.key`` and ``tls.crt``/``tls.key``, so a restarted
  webhook keeps its CA (and the caBundle already in the webhook configurations stays valid).
* Each is renewed when 2/3 of its validity has passed (``rotate_fraction``). A new serving
  certificate is loaded into the live ``SSLContext``: new TLS handshakes get it, no restart.
* A renewed CA is published *next to* the previous one (``ca-bundle.crt`` holds both until the
  old one expires), so the API server trusts the serving certificate during the switch.

The certificates are issued by toposched's one PKI (``scheduler/http/pki.py``).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import ssl
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509

from scheduler.http.pki import (
    DAY,
    IPAddress,
    Pair,
    cert_pem,
    due,
    issue_ca,
    issue_serving,
    key_pem,
    load_pair,
    not_after,
    not_before,
    now_utc,
    sans_match,
    tls_server_context,
    write_file,
)

log = logging.getLogger(__name__)


class CertManager:
    def __init__(self, cert_dir: Path, dns_names: Sequence[str], ip_addresses: Sequence[str] = (),
                 ca_validity: dt.timedelta = 365 * DAY, cert_validity: dt.timedelta = 90 * DAY,
                 rotate_fraction: float = 2 / 3) -> None:
        self.dir = Path(cert_dir)
        self.dns_names = list(dns_names)
        self.ips: list[IPAddress] = [ipaddress.ip_address(ip) for ip in ip_addresses]
        self.ca_validity = ca_validity
        self.cert_validity = cert_validity
        self.rotate_fraction = rotate_fraction
        self.ca: Pair | None = None
        self.serving: Pair | None = None
        self.previous_cas: list[x509.Certificate] = []

    # ---- files ------------------------------------------------------------------------
    @property
    def cert_file(self) -> Path:
        return self.dir / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.dir / "tls.key"

    @property
    def ca_bundle_file(self) -> Path:
        return self.dir / "ca-bundle.crt"

    def _load(self) -> None:
        try:
            self.ca = load_pair((self.dir / "ca.crt").read_bytes(), (self.dir / "ca.key").read_bytes())
        except (OSError, ValueError):
            self.ca = None
        try:
            self.serving = load_pair(self.cert_file.read_bytes(), self.key_file.read_bytes())
        except (OSError, ValueError):
            self.serving = None
        try:
            bundle = x509.load_pem_x509_certificates(self.ca_bundle_file.read_bytes())
        except (OSError, ValueError):
            bundle = []
        now = now_utc()
        self.previous_cas = [c for c in bundle if self.ca is None or c != self.ca.cert and not_after(c) > now]

    # ---- issuing ------------------------------------------------------------------------
    def _new_ca(self) -> Pair:
        return issue_ca(self.ca_validity)

    def _new_serving(self, ca: Pair) -> Pair:
        return issue_serving(ca, self.dns_names, self.ips, self.cert_validity)

    def _sans_match(self, cert: x509.Certificate) -> bool:
        return sans_match(cert, self.dns_names, self.ips)

    def ensure(self, now: dt.datetime | None = None) -> bool:
        """Load, create or renew as needed. Returns True when anything changed (reload + re-publish)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.ca is None:
            self._load()
        changed = False
        if self.ca is None or due(self.ca.cert, self.rotate_fraction, now):
            if self.ca is not None:
                self.previous_cas.append(self.ca.cert)
                log.info("CA %s is due for rotation; issuing a new one", self.ca.cert.subject.rfc4514_string())
            self.ca = self._new_ca()
            write_file(self.dir / "ca.key", key_pem(self.ca.key), private=True)
            write_file(self.dir / "ca.crt", cert_pem(self.ca.cert))
            changed = True
        when = now or now_utc()
        self.previous_cas = [c for c in self.previous_cas if not_after(c) > when]
        s = self.serving
        if (changed or s is None or due(s.cert, self.rotate_fraction, now) or not self._sans_match(s.cert)
                or s.cert.issuer != self.ca.cert.subject):
            self.serving = self._new_serving(self.ca)
            write_file(self.key_file, key_pem(self.serving.key), private=True)
            write_file(self.cert_file, cert_pem(self.serving.cert))
            log.info("issued serving certificate valid until %s", not_after(self.serving.cert).isoformat())
            changed = True
        bundle = self.ca_bundle()
        if not self.ca_bundle_file.exists() or self.ca_bundle_file.read_bytes() != bundle:
            write_file(self.ca_bundle_file, bundle)
            changed = True
        return changed

    def ca_bundle(self) -> bytes:
        """PEM of the current CA followed by still-valid previous CAs (for the caBundle field)."""
        assert self.ca is not None
        return b"".join([cert_pem(self.ca.cert)] + [cert_pem(c) for c in self.previous_cas])

    def next_check(self, now: dt.datetime | None = None) -> float:
        """Seconds until the earliest rotation point (at least 1 s)."""
        assert self.ca is not None and self.serving is not None
        now = now or now_utc()
        points = []
        for cert in (self.ca.cert, self.serving.cert):
            start, end = not_before(cert), not_after(cert)
            points.append(start + (end - start) * self.rotate_fraction)
        return max(1.0, (min(points) - now).total_seconds())

    def server_context(self) -> ssl.SSLContext:
        ctx = tls_server_context()
        self.load_into(ctx)
        return ctx

    def load_into(self, ctx: ssl.SSLContext) -> None:
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))

"""Where the webhook's serving certificate comes from (``toposched webhook --cert-source``).

* ``self``: this process issues its own CA and certificate in ``--cert-dir`` and publishes the
  CA as caBundle (one replica; local clusters). :class:`SelfSignedSource`.
* ``files``: a certificate someone else issues and mounts (cert-manager's Secret): loaded from
  the directory and reloaded when its files change; caBundle is not ours (cainjector fills it).
  :class:`MountedFilesSource`.
* ``secret``: replicas share one CA and certificate in a Secret; the Lease holder issues and
  rotates them. ``admission/sharedcerts.py``.

Each source owns one live ``ssl.SSLContext`` (the HTTPS server wraps every new connection with
it, so a reload reaches new handshakes without a restart) and says whether it is ready: a
certificate is loaded and the API server trusts its CA.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from admission import configs
from admission.certs import CertManager
from scheduler.http.pki import tls_server_context
from scheduler.k8s.informer import Api

log = logging.getLogger(__name__)


class CertSource(Protocol):
    @property
    def ssl_context(self) -> ssl.SSLContext: ...

    def start(self) -> None:
        """Begin loading / issuing / watching (after the HTTPS listener is up)."""

    def stop(self) -> None: ...

    def readiness(self) -> tuple[bool, str]:
        """(ready, why not): ready = a certificate is loaded and its CA is trusted."""

    @property
    def serving_pem(self) -> bytes:
        """The certificate chain and key served now, as PEM ("" before one is loaded): what
        the HTTPS front (``webfront/``) asks for over the decider's socket."""


class SelfSignedSource:
    """One process, its own CA (``CertManager`` files), rotated by a background thread. When
    ``api`` and ``desired`` are given, the CA bundle is published into the configurations."""

    def __init__(self, certs: CertManager, api: Api | None = None, desired: Sequence[dict[str, Any]] = (),
                 create_configs: bool = True, rotation_check_s: float = 3600) -> None:
        self.certs = certs
        self.api = api
        self.desired = list(desired)
        self.create_configs = create_configs
        self.rotation_check_s = rotation_check_s
        self.certs.ensure()
        self._context = certs.server_context()
        self._pem = _pair_pem(certs.cert_file, certs.key_file)
        self._published = threading.Event()
        self._stop = threading.Event()

    @property
    def ssl_context(self) -> ssl.SSLContext:
        return self._context

    @property
    def serving_pem(self) -> bytes:
        return self._pem

    def publish(self) -> None:
        if self.api is not None and self.desired:
            configs.sync(self.api, self.desired, self.certs.ca_bundle(), create=self.create_configs)
        self._published.set()

    def rotate_once(self) -> bool:
        """Renew what is due. The bundle (old and new CA) is published *before* the new serving
        certificate is loaded, so the API server never meets a certificate it cannot verify."""
        if not self.certs.ensure():
            return False
        self.publish()
        self.certs.load_into(self._context)
        self._pem = _pair_pem(self.certs.cert_file, self.certs.key_file)
        return True

    def start(self) -> None:
        self.publish()
        threading.Thread(target=self._rotation_loop, name="cert-rotation", daemon=True).start()

    def _rotation_loop(self) -> None:
        while not self._stop.is_set():
            if self._stop.wait(min(self.certs.next_check(), self.rotation_check_s)):
                return
            try:
                self.rotate_once()
            except Exception:
                log.exception("certificate rotation failed; retrying in %.0fs", self.rotation_check_s)

    def stop(self) -> None:
        self._stop.set()

    def readiness(self) -> tuple[bool, str]:
        if not self._published.is_set():
            return False, "caBundle not published yet"
        return True, "ok"


class MountedFilesSource:
    """``tls.crt``/``tls.key`` from a mounted directory (a Secret volume: the kubelet swaps the
    files atomically), checked every ``poll_s`` and reloaded when their content changes. A pair
    that does not load (mid-update, key and certificate from different issues) is skipped and
    the previous one kept until the next check."""

    def __init__(self, directory: Path, poll_s: float = 10.0, cert_name: str = "tls.crt",
                 key_name: str = "tls.key") -> None:
        self.cert_file = Path(directory) / cert_name
        self.key_file = Path(directory) / key_name
        self.poll_s = poll_s
        self._context = tls_server_context()
        self._loaded_digest = ""
        self._pem = b""
        self._error = "no certificate loaded yet"
        self._stop = threading.Event()

    @property
    def ssl_context(self) -> ssl.SSLContext:
        return self._context

    @property
    def serving_pem(self) -> bytes:
        return self._pem

    def reload(self) -> bool:
        """Load the files if they changed; True when a new certificate is now served."""
        try:
            cert, key = self.cert_file.read_bytes(), self.key_file.read_bytes()
        except OSError as exc:
            self._error = f"cannot read {self.cert_file} / {self.key_file}: {exc.strerror}"
            return False
        digest = hashlib.sha256(cert + b"\0" + key).hexdigest()
        if digest == self._loaded_digest:
            return False
        try:
            # Straight from the mounted files (no temporary copy: the root filesystem is read-only);
            # a pair that changes between the reads fails here or differs at the next check.
            tls_server_context().load_cert_chain(str(self.cert_file), str(self.key_file))  # check first
            self._context.load_cert_chain(str(self.cert_file), str(self.key_file))
        except (ssl.SSLError, OSError) as exc:
            self._error = f"{self.cert_file} and {self.key_file} do not load together: {exc}"
            log.warning("%s; keeping the certificate served so far", self._error)
            return False
        self._loaded_digest = digest
        self._pem = cert + b"\n" + key
        log.info("serving the certificate in %s (sha256 of files %s)", self.cert_file, digest[:12])
        return True

    def start(self) -> None:
        self.reload()
        threading.Thread(target=self._watch, name="cert-files", daemon=True).start()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.reload()

    def stop(self) -> None:
        self._stop.set()

    def readiness(self) -> tuple[bool, str]:
        # The CA is published by whoever issued the certificate (cert-manager's cainjector).
        return (True, "ok") if self._loaded_digest else (False, self._error)


def _pair_pem(cert_file: Path, key_file: Path) -> bytes:
    return cert_file.read_bytes() + b"\n" + key_file.read_bytes()

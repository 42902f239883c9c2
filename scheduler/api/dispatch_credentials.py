"""A worker's credentials Secret (admin-written, read by the dispatcher) -> what the gRPC
channel needs, checked before any channel is built (issue 43; docs/security.md, the
dispatcher's rows).

Keys: ``ca.crt`` (PEM certificates that verify the worker; turns TLS on), ``tls.crt`` +
``tls.key`` (PEM certificate and the private key of its public key: mTLS, both or neither),
``token`` (a bearer token: printable ASCII, no spaces). A Secret that does not parse is a
:class:`CredentialsError` naming the key and the fault, so that the worker is left unaskable
with one log line instead of failing each call (grpc would only fail at connect time, with a
message that names neither the Secret nor the key).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

KEYS = ("ca.crt", "tls.crt", "tls.key", "token")


class CredentialsError(ValueError):
    """The Secret's ``data[key]`` cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class Credentials:
    root_ca: bytes | None = None
    client_cert: bytes | None = None
    client_key: bytes | None = None
    token: str | None = None


def _decoded(data: Mapping[str, Any]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key in KEYS:
        if key not in data:
            continue
        value = data[key]
        try:
            if not isinstance(value, str):
                raise ValueError("not a string")
            out[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CredentialsError(f"data[{key}]: not base64; write the value base64-encoded under data "
                                   "(or as text under stringData)") from exc
    return out


def _public_bytes(key: Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def credentials(secret: Mapping[str, Any]) -> Credentials:
    """The channel's credentials from a Secret object; CredentialsError when a key is unusable."""
    data = secret.get("data")
    raw = _decoded(data if isinstance(data, Mapping) else {})
    ca, cert, key = raw.get("ca.crt"), raw.get("tls.crt"), raw.get("tls.key")
    if ca is not None:
        try:
            x509.load_pem_x509_certificates(ca)
        except ValueError as exc:
            raise CredentialsError(f"data[ca.crt]: not PEM certificates ({exc}); put the worker's gRPC CA "
                                   "there") from exc
    if (cert is None) != (key is None):
        missing = "tls.key" if key is None else "tls.crt"
        raise CredentialsError(f"data[{missing}]: missing; mTLS needs both tls.crt and tls.key, or neither")
    if cert is not None and key is not None:
        try:
            leaf = x509.load_pem_x509_certificate(cert)
        except ValueError as exc:
            raise CredentialsError(f"data[tls.crt]: not a PEM certificate ({exc})") from exc
        try:
            private = serialization.load_pem_private_key(key, None)
        except (ValueError, TypeError) as exc:
            raise CredentialsError(f"data[tls.key]: not an unencrypted PEM private key ({exc})") from exc
        if _public_bytes(private.public_key()) != _public_bytes(leaf.public_key()):
            raise CredentialsError("data[tls.key]: not the private key of data[tls.crt]'s certificate")
    token: str | None = None
    if raw.get("token") is not None:
        text = raw["token"].decode("ascii", errors="replace").strip()
        if not text or not all(33 <= ord(c) < 127 for c in text):
            raise CredentialsError("data[token]: must be a bearer token of printable ASCII without spaces")
        token = text
    return Credentials(ca, cert, key, token)

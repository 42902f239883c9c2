"""The size cap of one AdmissionReview (issue 39): a review's cost grows with its size, and
faster than its size for large maps (``json.loads`` of a 940 KB review with 64,000 labels took
230 ms against 2 ms for a normal review), so a review larger than any normal object's is refused
before it is parsed, with HTTP 413 and a message naming the limit and the fix.

Measured (docs/security.md): a JobSet of 8 replicated Jobs, 2 containers each with 100
environment variables (a large real training job) is a 179 KB CREATE review and a 359 KB UPDATE
review (object and oldObject). The cap, 1 MiB, is three times that; the API server's own limits
(1.5 MiB per object in etcd, 3 MiB per request) are above it, so an UPDATE of a queued object of
more than about 500 KB is refused here: such a template belongs in a ConfigMap (``envFrom``).
"""

from __future__ import annotations

MAX_REVIEW_BYTES = 1024 * 1024


def oversize_message(size: int, limit: int = MAX_REVIEW_BYTES) -> str | None:
    """The refusal of a review of ``size`` bytes, or None when it is within ``limit``."""
    if size <= limit:
        return None
    return (f"AdmissionReview of {size} bytes is over the webhook's limit of {limit} bytes (1 MiB: object and "
            "oldObject together); nothing was created or changed. Keep pod templates small: move large env "
            "lists, commands and files into a ConfigMap or Secret (envFrom, volumes)")

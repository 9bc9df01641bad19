"""For a webhook receiver: check that a delivery came from Mnemo.

from mnemo_client import verify_signature

if not verify_signature(request.body, request.headers.get("X-Mnemo-Signature"), secret):
    return 401
"""

from __future__ import annotations

import hashlib
import hmac


def verify_signature(body: bytes, header: str | None, secret: str) -> bool:
    """Whether `header` (X-Mnemo-Signature, `sha256=<hex>`) is the HMAC-SHA256 of the raw `body`
    with the subscription's secret. Pass the body's bytes as received, before any JSON parsing."""
    if not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(header.removeprefix("sha256="), expected)

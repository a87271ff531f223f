"""Verifies a webhook request as the Standard Webhooks spec signs it (shared/DESIGN.md, "Talking
to it without a WebSocket"; the spec's "Signature scheme" and "Webhook headers"). The server side
(the outbox that sends tabsync's webhooks) is being built separately; this is the receiver's half.

    verifier = WebhookVerifier("whsec_...")          # the secret given when the hook was added
    payload = verifier.verify(raw_body, request.headers)   # raises WebhookInvalid, else the JSON

The signed content is `webhook-id` + "." + `webhook-timestamp` + "." + the raw body, bytes as
received (parse the JSON only after verifying: a re-serialised body signs differently). The
signature is HMAC-SHA256 under the secret (the base64 after `whsec_`), base64-encoded and
prefixed `v1,`; `webhook-signature` may hold several, separated by spaces (secret rotation), and
one valid `v1` among them is enough (`v1a` asymmetric ones and unknown versions are skipped).

Guarantees: a request passes only with all three headers, a whole-number timestamp within
`tolerance` seconds of now (either side: replayed old requests and ones from the future both
fail), and a signature compared in constant time; every failure raises `WebhookInvalid` with the
reason, never a bare exception. The secret is never in a message.
"""
import base64
import binascii
import hashlib
import hmac
import json
import time

PREFIX = "whsec_"


class WebhookInvalid(Exception):
    """The request is not a valid, fresh, signed webhook; `str()` says why."""


class WebhookVerifier:
    def __init__(self, secret, tolerance=300):
        """`secret`: "whsec_" + base64 (the prefix optional; padding optional), or raw bytes.
        `tolerance`: seconds a timestamp may be from now (the spec's libraries use 5 minutes)."""
        if isinstance(secret, str):
            text = secret[len(PREFIX):] if secret.startswith(PREFIX) else secret
            try:
                secret = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("a webhook secret is base64 after whsec_") from None
        if not secret:
            raise ValueError("a webhook secret must not be empty")
        self._key, self.tolerance = bytes(secret), tolerance

    def sign(self, msg_id, timestamp, body):
        """The `v1,` signature of one request (what a sender puts in `webhook-signature`)."""
        if isinstance(body, str):
            body = body.encode()
        content = f"{msg_id}.{int(timestamp)}.".encode() + body
        return "v1," + base64.b64encode(hmac.new(self._key, content, hashlib.sha256).digest()).decode()

    def verify(self, body, headers, now=None):
        """Checks one request; returns its body as JSON. `headers`: any mapping (names matched
        without regard to case); `body`: the raw bytes (or str) received."""
        lower = {str(k).lower(): v for k, v in dict(headers).items()}
        msg_id, stamp, signatures = (lower.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
        if not msg_id or not stamp or not signatures:
            raise WebhookInvalid("missing webhook-id, webhook-timestamp or webhook-signature")
        if not stamp.isdigit():
            raise WebhookInvalid(f"webhook-timestamp is not a whole number of seconds: {stamp[:40]!r}")
        now = time.time() if now is None else now
        if abs(now - int(stamp)) > self.tolerance:
            raise WebhookInvalid(f"webhook-timestamp {stamp} is more than {self.tolerance} s from now")
        expected = self.sign(msg_id, stamp, body).encode()
        for candidate in signatures.split(" "):
            version, _, _ = candidate.partition(",")
            if version == "v1" and hmac.compare_digest(candidate.encode(), expected):
                try:
                    return json.loads(body)
                except ValueError:
                    raise WebhookInvalid("the signed body is not JSON") from None
        raise WebhookInvalid("no webhook-signature matches")

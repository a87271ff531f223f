"""The webhook signature verifier (clients/python/tabsync_client/webhooks.py) against the Standard
Webhooks spec: the known-good vector of the spec's reference libraries (their sign tests: secret
whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp 1614265330,
body {"test": 2432232314}), vectors this file computes from the spec's words with hmac/hashlib
directly, the timestamp tolerance on both sides, several signatures in one header (rotation),
and every way a request can be wrong, each a WebhookInvalid with its reason. The server's sending
side (the outbox) is built separately; when it lands, its deliveries are checked with this."""
import base64
import hashlib
import hmac
import json
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "clients" / "python"))

from tabsync_client import WebhookInvalid, WebhookVerifier  # noqa: E402

REFERENCE = {
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "timestamp": 1614265330,
    "body": b'{"test": 2432232314}',
    "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}


def spec_signature(secret_bytes, msg_id, timestamp, body):
    """The spec's rule, spelled out: base64(HMAC-SHA256(key, "id.timestamp.body")), prefixed v1,."""
    content = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(secret_bytes, content, hashlib.sha256).digest()).decode()


def headers(msg_id, timestamp, signature):
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def test_the_reference_vector_signs_and_verifies():
    r = REFERENCE
    verifier = WebhookVerifier(r["secret"])
    assert verifier.sign(r["id"], r["timestamp"], r["body"]) == r["signature"]
    got = verifier.verify(r["body"], headers(r["id"], r["timestamp"], r["signature"]), now=r["timestamp"])
    assert got == {"test": 2432232314}
    # The same secret without its prefix, and the body as text, verify the same.
    assert WebhookVerifier(r["secret"][6:]).verify(r["body"].decode(), headers(r["id"], r["timestamp"], r["signature"]),
                                                   now=r["timestamp"] + 299) == {"test": 2432232314}


@pytest.mark.parametrize("seed", range(20))
def test_vectors_computed_from_the_spec_rules(seed):
    key = hashlib.sha256(f"key {seed}".encode()).digest()[: 16 + seed]  # 16 to 35 bytes
    secret = "whsec_" + base64.b64encode(key).decode().rstrip("=" if seed % 2 else "")  # padded and not
    msg_id = f"team:{seed * 7919}"
    timestamp = 1_700_000_000 + seed * 3601
    body = json.dumps({"workspace": "team", "version": str(seed), "op": {"add": {"tab": {"id": f"t{seed}"}}}},
                      separators=(",", ":")).encode()
    expected = spec_signature(key, msg_id, timestamp, body)
    verifier = WebhookVerifier(secret)
    assert verifier.sign(msg_id, timestamp, body) == expected
    assert verifier.verify(body, headers(msg_id, timestamp, expected), now=timestamp)["version"] == str(seed)
    # One byte changed anywhere in what is signed: refused.
    for bad in (body[:-2] + b" }", body.replace(b"team", b"tean")):
        with pytest.raises(WebhookInvalid, match="no webhook-signature matches"):
            verifier.verify(bad, headers(msg_id, timestamp, expected), now=timestamp)
    with pytest.raises(WebhookInvalid, match="no webhook-signature matches"):
        verifier.verify(body, headers(msg_id + "0", timestamp, expected), now=timestamp)
    with pytest.raises(WebhookInvalid, match="no webhook-signature matches"):
        verifier.verify(body, headers(msg_id, timestamp + 1, expected), now=timestamp)


def test_the_timestamp_must_be_within_the_tolerance_either_side():
    r = REFERENCE
    verifier = WebhookVerifier(r["secret"], tolerance=300)
    h = headers(r["id"], r["timestamp"], r["signature"])
    for now in (r["timestamp"] - 300, r["timestamp"], r["timestamp"] + 300):
        assert verifier.verify(r["body"], h, now=now) == {"test": 2432232314}
    for now in (r["timestamp"] - 301, r["timestamp"] + 301):
        with pytest.raises(WebhookInvalid, match="from now"):
            verifier.verify(r["body"], h, now=now)
    with pytest.raises(WebhookInvalid, match="from now"):
        verifier.verify(r["body"], h)  # now: 2021 is long gone


def test_several_signatures_one_valid_v1_is_enough():
    r = REFERENCE
    verifier = WebhookVerifier(r["secret"])
    other = spec_signature(b"an old secret", r["id"], r["timestamp"], r["body"])
    asym = "v1a," + base64.b64encode(bytes(64)).decode()
    # The right signature under another version tag is not a v1 signature.
    relabelled = "v2," + r["signature"][3:]
    for header in (f"{other} {r['signature']}", f"{asym} {r['signature']} {other}", f"{r['signature']} {asym}"):
        assert verifier.verify(r["body"], headers(r["id"], r["timestamp"], header), now=r["timestamp"])
    for header in (f"{other} {asym}", relabelled, "v1,", "", r["signature"][3:]):
        with pytest.raises(WebhookInvalid):
            verifier.verify(r["body"], headers(r["id"], r["timestamp"], header), now=r["timestamp"])


def test_every_malformed_request_is_a_webhook_invalid():
    r = REFERENCE
    verifier = WebhookVerifier(r["secret"])
    good = headers(r["id"], r["timestamp"], r["signature"])
    for name in good:
        missing = {k: v for k, v in good.items() if k != name}
        with pytest.raises(WebhookInvalid, match="missing"):
            verifier.verify(r["body"], missing, now=r["timestamp"])
    for stamp in ("hello", "-1614265330", "1614265330.0", " 1614265330"):
        with pytest.raises(WebhookInvalid, match="whole number"):
            verifier.verify(r["body"], {**good, "webhook-timestamp": stamp}, now=r["timestamp"])
    # Header names are matched without regard to case, as HTTP has them.
    upper = {k.upper(): v for k, v in good.items()}
    assert verifier.verify(r["body"], upper, now=r["timestamp"]) == {"test": 2432232314}
    # A signed body that is not JSON is refused after the signature matched.
    body = b"not json"
    with pytest.raises(WebhookInvalid, match="not JSON"):
        verifier.verify(body, headers("m", 5, verifier.sign("m", 5, body)), now=5)


def test_secrets_are_checked_and_never_shown():
    for bad in ("", "whsec_", b"", "whsec_not*base64"):
        with pytest.raises(ValueError) as refused:
            WebhookVerifier(bad)
        assert "not*base64" not in str(refused.value)
    raw = os.urandom(24)
    verifier = WebhookVerifier(raw)
    assert verifier.sign("a", 1, b"{}") == spec_signature(raw, "a", 1, b"{}")
    with pytest.raises(WebhookInvalid) as refused:
        verifier.verify(b"{}", headers("a", 1, "v1,AAAA"), now=1)
    assert base64.b64encode(raw).decode() not in str(refused.value)

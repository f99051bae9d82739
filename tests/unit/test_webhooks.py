"""Webhooks without the stack: Standard Webhooks signatures, the SSRF rule (at registration's
check and at each attempt, against a receiver on 127.0.0.1), the back-off."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import itertools
import json
import uuid
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from memora.basics.config import Settings
from memora.store.webhooks import Claimed
from memora.webhooks import guard, signing
from memora.webhooks.delivery import attempt, retry_delay
from memora.webhooks.sender import _pinned, send
from tests.integration.webhook_support import receiving


def test_signature_matches_the_specifications_example() -> None:
    # The example of the Standard Webhooks specification (secret, id, timestamp, body).
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    signature = signing.sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_new_secret_signs_what_a_receiver_computes() -> None:
    secret = signing.generate_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    headers = signing.headers(secret, "msg_1", 1700000000, b'{"a":1}')
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, b'msg_1.1700000000.{"a":1}', hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(mac).decode()
    assert headers["webhook-id"] == "msg_1" and headers["webhook-timestamp"] == "1700000000"
    assert signing.verify(
        secret, "msg_1", 1700000000, b'{"a":1}', "v1,bad " + headers["webhook-signature"]
    )
    assert not signing.verify(secret, "msg_1", 1700000001, b'{"a":1}', headers["webhook-signature"])


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("0.0.0.0", False),
        ("100.64.0.1", False),  # shared address space (carrier-grade NAT)
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("::ffff:169.254.169.254", False),
    ],
)
def test_only_public_addresses_are_public(address: str, public: bool) -> None:
    assert guard.is_public(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize(
    "url",
    ["ftp://93.184.215.14/x", "file:///etc/passwd", "http:///nohost", "https://[::1", "gopher://a"],
)
def test_urls_that_are_not_http_are_refused(url: str) -> None:
    with pytest.raises(guard.UnsafeTarget):
        guard.resolve(url, allow_private=True)


def test_private_targets_need_the_operators_consent() -> None:
    for url in ("http://127.0.0.1:9/hook", "http://localhost/hook", "http://[::1]:80/",
                "http://169.254.169.254/latest/meta-data/"):  # fmt: skip
        with pytest.raises(guard.UnsafeTarget, match="MEMORA_WEBHOOK_ALLOW_PRIVATE"):
            guard.resolve(url, allow_private=False)
    assert str(guard.resolve("http://127.0.0.1:9/hook", allow_private=True)) == "127.0.0.1"
    assert str(guard.resolve("https://93.184.215.14/hook", allow_private=False)) == "93.184.215.14"


def test_the_request_goes_to_the_checked_address_under_its_own_name() -> None:
    url, headers, extensions = _pinned("https://hooks.example.com:8443/in?x=1", "93.184.215.14")
    assert str(url) == "https://93.184.215.14:8443/in?x=1"
    assert headers == {"host": "hooks.example.com:8443"}
    assert extensions == {"sni_hostname": "hooks.example.com"}
    url, headers, extensions = _pinned("http://hooks.example.com/in", "2606:4700::1111")
    assert str(url) == "http://[2606:4700::1111]/in" and headers == {"host": "hooks.example.com"}
    assert extensions == {}


def test_retries_back_off_exponentially_up_to_the_cap() -> None:
    s = Settings(webhook_retry_base_seconds=5, webhook_retry_max_delay_seconds=3600)
    delays = [retry_delay(n, s) for n in range(1, 13)]
    assert delays[:5] == [5, 10, 20, 40, 80]
    assert delays[-1] == 3600 and all(a <= b for a, b in itertools.pairwise(delays))
    # the default schedule fits about 30 attempts into the 24 hours' window
    total, attempts = 0.0, 0
    while total + retry_delay(attempts + 1, s) <= 86400:
        attempts += 1
        total += retry_delay(attempts, s)
    assert 25 <= attempts <= 35


def _claimed(url: str) -> Claimed:
    """A delivery as a sender holds it, to `url` (as if registered when it resolved publicly)."""
    payload = {"type": "webhook.ping", "data": {}}
    return Claimed(uuid.uuid4(), "evt_1", payload, 1, datetime.now(UTC), url,
                   signing.generate_secret())  # fmt: skip


def test_an_attempt_to_a_name_resolving_to_loopback_is_refused_and_never_sent() -> None:
    """The guard runs again at every attempt: `localhost` (resolved offline, to loopback) is
    refused without a connection, for good (no retry), unless private targets are allowed."""
    with receiving() as receiver:
        port = urlsplit(receiver.url).port
        url = f"http://localhost:{port}/ok"
        refused = send(url, b"{}", {}, allow_private=False, connect_timeout=2, total_timeout=5)
        assert refused.status_code is None and refused.retry is False, refused
        assert refused.error is not None and refused.error.startswith("refused: "), refused
        assert "loopback" in refused.error
        # the delivery path passes the operator's setting on
        by_delivery = attempt(_claimed(url), Settings(webhook_allow_private=False))
        assert by_delivery.error is not None and by_delivery.error.startswith("refused: ")
        assert receiver.requests == []  # nothing reached the receiver
        # the receiver answers: with private targets allowed, the same attempt gets through
        allowed = attempt(
            _claimed(f"http://127.0.0.1:{port}/ok"), Settings(webhook_allow_private=True)
        )
        assert allowed.succeeded and allowed.status_code == 204, allowed
        (request,) = receiver.at("/ok")
        assert json.loads(request.body)["type"] == "webhook.ping"

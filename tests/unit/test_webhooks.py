"""Webhooks without a server: Standard Webhooks signatures, the SSRF rule, the back-off."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import itertools

import pytest

from memora.basics.config import Settings
from memora.webhooks import guard, signing
from memora.webhooks.delivery import retry_delay
from memora.webhooks.sender import _pinned


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

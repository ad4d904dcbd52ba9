"""The review server's request checks, one by one (the served page is tested in tests/e2e/test_review_web.py)."""

from __future__ import annotations

import pytest

from kernel_agent.review.web.security import (
    PAGE_POLICY,
    Refused,
    Secrets,
    check_decision,
    check_host,
    origins,
    route,
)

TOKEN = "s3cret-token"
ORIGIN = "http://127.0.0.1:8123"
ALLOWED = origins(8123)
GOOD = {"Content-Type": "application/json", "X-CSRF-Token": "csrf-value", "Origin": ORIGIN}


def test_the_path_must_start_with_the_token() -> None:
    assert route(f"/{TOKEN}/", TOKEN) == ""
    assert route(f"/{TOKEN}/static/review.js?x=1", TOKEN) == "static/review.js"
    for path in ("/", f"/{TOKEN}", f"/{TOKEN}x/", f"/x{TOKEN}/", "//", f"/static/{TOKEN}/", f"/{TOKEN[:-1]}/"):
        with pytest.raises(Refused) as refused:
            route(path, TOKEN)
        assert refused.value.status == 403, path


def test_only_loopback_on_the_servers_own_port_is_answered() -> None:
    check_host("127.0.0.1:8123", 8123)
    check_host("localhost:8123", 8123)
    for host in (
        None,
        "",
        "127.0.0.1",
        "127.0.0.1:8124",
        "evil.example:8123",
        "localhost.evil.example:8123",
        "[::1]:8123",
    ):
        with pytest.raises(Refused) as refused:
            check_host(host, 8123)
        assert refused.value.status == 421, host


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"X-CSRF-Token": ""}, 403),
        ({"X-CSRF-Token": "csrf-valu"}, 403),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ({"Content-Type": "text/plain"}, 415),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://127.0.0.1:8124"}, 403),
        ({"Origin": "http://localhost.evil.example:8123"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
    ],
)
def test_a_decision_needs_json_the_same_origin_and_the_csrf_secret(change: dict[str, str], status: int) -> None:
    check_decision(GOOD, ALLOWED, "csrf-value")
    check_decision({**GOOD, "Origin": "http://localhost:8123"}, ALLOWED, "csrf-value")
    check_decision(
        {**GOOD, "Content-Type": "application/json; charset=utf-8", "Sec-Fetch-Site": "same-origin"},
        ALLOWED,
        "csrf-value",
    )
    headers = {key: value for key, value in {**GOOD, **change}.items() if value or key != "X-CSRF-Token"}
    with pytest.raises(Refused) as refused:
        check_decision(headers, ALLOWED, "csrf-value")
    assert refused.value.status == status


def test_each_server_draws_its_own_two_secrets_and_the_policy_allows_no_inline_code() -> None:
    first, second = Secrets(), Secrets()
    assert len({first.token, first.csrf, second.token, second.csrf}) == 4 and len(first.token) >= 32
    assert "'unsafe-inline'" not in PAGE_POLICY and "script-src 'self'" in PAGE_POLICY and "http" not in PAGE_POLICY

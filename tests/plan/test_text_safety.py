"""drills.text: outside text shown safely (terminal, Markdown, HTML) and URLs redacted."""

from __future__ import annotations

import pytest

from drills.plan.refs import is_credential_key
from drills.text import (
    control_characters,
    for_html,
    for_markdown,
    for_terminal,
    is_sensitive_param,
    redact_url,
)

# Each can repaint, reorder or break a line when printed raw.
CONTROLS = ["\x1b", "\x07", "\x00", "\x08", "\r", "\x7f", "\x9b", "\x85", "\u202e", "\u2066"]


@pytest.mark.parametrize("char", CONTROLS)
def test_for_terminal_makes_every_control_visible(char: str) -> None:
    shown = for_terminal(f"ok{char}[2J done")
    assert char not in shown
    assert not control_characters(shown)
    assert shown.startswith("ok\\") and shown.endswith("[2J done")


def test_fake_all_checks_passed_is_shown_for_what_it_is() -> None:
    forged = "\x1b[2K\r\x1b[32m✓ all checks passed\x1b[0m"
    assert for_terminal(forged) == "\\x1b[2K\\x0d\\x1b[32m✓ all checks passed\\x1b[0m"


def test_multiline_keeps_newlines_and_tabs_only() -> None:
    assert for_terminal("a\n\tb\x1b", multiline=True) == "a\n\tb\\x1b"
    assert for_terminal("a\nb") == "a\\x0ab"


def test_plain_text_is_returned_unchanged() -> None:
    text = "Plan gpu-platform — 東京 ✓"
    assert for_terminal(text) is text


def test_markdown_and_html() -> None:
    assert for_markdown("**bold** [x](http://e) \x1b") == (
        "\\*\\*bold\\*\\* \\[x\\](http://e) \\\\x1b"
    )
    assert for_html('<script>"x"</script>\x1b') == (
        "&lt;script&gt;&quot;x&quot;&lt;/script&gt;\\x1b"
    )


@pytest.mark.parametrize(
    "name",
    [
        "access_token",
        "token",
        "sig",
        "signature",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "X-Goog-Signature",
        "X-Goog-Credential",
        "api_key",
        "apikey",
        "apiKey",
        "key",
        "password",
        "passwd",
        "pwd",
        "secret",
        "client_secret",
        "clientSecret",
        "auth",
        "Authorization",
        "AWSAccessKeyId",
        "jwt",
        "x%2Dapi%2Dkey",
        # one lowercase word, and short names
        "accesstoken",
        "apitoken",
        "authtoken",
        "sessiontoken",
        "privatekey",
        "private-key",
        "clientsecret",
        "accesskeyid",
        "pass",
        "pw",
        "PW",
        "passwd",
        "passphrase",
        "db_pass",
        "sig",
        "X-Api-Key",
        "ssh_key",
        "signingKey",
    ],
)
def test_sensitive_parameter_names(name: str) -> None:
    assert is_sensitive_param(name)
    assert is_credential_key(name)


@pytest.mark.parametrize(
    "name",
    [
        "site",
        "model",
        "monkey",
        "keyword",
        "keys",
        "keyboard_layout",
        "page",
        "region",
        "timeout",
        "bypass",
        "compass",
        "passenger",
        "author",
        "design",
        "code",
        "status_code",
    ],
)
def test_ordinary_parameter_names(name: str) -> None:
    assert not is_sensitive_param(name)
    assert not is_credential_key(name)


def test_one_list_for_query_parameters_and_plan_keys() -> None:
    for name in ("accesstoken", "pw", "clientsecret", "api_key", "page", "monkey"):
        assert is_credential_key(name) == is_sensitive_param(name)


@pytest.mark.parametrize(
    "name",
    ["accesstoken", "apitoken", "authtoken", "sessiontoken", "privatekey", "clientsecret", "pass"],
)
def test_redact_url_hides_one_word_credential_names(name: str) -> None:
    redacted = redact_url(f"https://h/x?page=2&{name}=Hunter2x&region=eu")
    assert redacted == f"https://h/x?page=2&{name}=***&region=eu"


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("http://admin:Hunter2Secret@127.0.0.3:5000/v2/", "http://***@127.0.0.3:5000/v2/"),
        ("http://user:pa/ss@host/x", "http://***@host/x"),
        ("http://user:p@ss@host", "http://***@host"),
        ("https://bob@host/", "https://***@host/"),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=abc&x=1",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&x=1",
        ),
        ("https://h/cb#access_token=abc&state=1", "https://h/cb#access_token=***&state=1"),
        ("https://h/p?sig=", "https://h/p?sig="),
        ("https://h/p?a=1;token=t", "https://h/p?a=1;token=***"),
        ("http://127.0.0.2:18080/healthz?site=dr", "http://127.0.0.2:18080/healthz?site=dr"),
        ("http://h/a?b#c", "http://h/a?b#c"),
        ("not a url \x1b", "not a url \\x1b"),
    ],
)
def test_redact_url(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted
    for secret in ("Hunter2Secret", "pa/ss", "p@ss", "abc", "AK%2F1"):
        if secret in url:
            assert secret not in redact_url(url)

"""Text that came from outside (a plan, a server, a URL), made safe to show.

A plan or a server reply may hold an ESC sequence that repaints the screen, a
bidi override that reorders a line, or a URL with a password in it. Every
output of drills goes through one of these helpers:

- :func:`for_terminal`: control characters become visible escapes (``\\x1b``);
- :func:`for_markdown`: the same, and Markdown's punctuation is escaped too;
- :func:`for_html`: the same, then HTML-escaped. (Jinja with autoescape, or
  Streamlit's ``st.text``, already escapes HTML; they still need
  :func:`for_terminal`'s treatment of control characters, or call this.)
- :func:`redact_url`: a URL without its user info and credential-like query values.

This module imports nothing from drills, so any layer can use it.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from urllib.parse import unquote

__all__ = [
    "control_characters",
    "for_html",
    "for_markdown",
    "for_terminal",
    "is_credential_name",
    "is_sensitive_param",
    "redact_url",
]

# Bidi embeddings, overrides and isolates: they reorder what follows them on the line,
# so a line can read differently from what it says ("Trojan Source").
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Line and paragraph separators: a terminal or a log viewer may break the line there.
_LINE_SEPARATORS = frozenset("\u2028\u2029")


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F or char in _BIDI_CONTROLS or char in _LINE_SEPARATORS


def control_characters(text: str, allow: str = "") -> list[tuple[int, str]]:
    """``(index, character)`` of every control character in ``text`` not in ``allow``."""
    return [(i, c) for i, c in enumerate(text) if c not in allow and _is_control(c)]


def visible(char: str) -> str:
    """One character as Python would escape it: ``\\x1b``, ``\\u202e``."""
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def for_terminal(text: str, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape, so it cannot drive
    the terminal. With ``multiline``, newlines and tabs are kept as they are."""
    keep = "\n\t" if multiline else ""
    if not any(_is_control(c) and c not in keep for c in text):
        return text  # the common case, and no copy
    return "".join(visible(c) if c not in keep and _is_control(c) else c for c in text)


# What can start markup anywhere in a line: code, emphasis, links and images, HTML,
# table cells, and Streamlit's $math$. Intra-word `_`, `-` or `.` change nothing, and
# escaping them would make every path and id unreadable in the Markdown source.
_MARKDOWN_INLINE = re.compile(r"([\\`*\[\]<>|$])")
# What starts a block only at the start of a line: headings, quotes, lists, rules.
_MARKDOWN_LINE_START = re.compile(r"^(\s*)([#>+\-=]|\d+[.)])", re.MULTILINE)


def first_line(exc: BaseException) -> str:
    """An error in one line: the first line of its message, or its type when it has none."""
    return next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)


def for_markdown(text: str) -> str:
    """``text`` for a Markdown document: controls escaped, Markdown punctuation inert."""
    inline = _MARKDOWN_INLINE.sub(r"\\\1", for_terminal(text))
    return _MARKDOWN_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), inline)


def for_html(text: str) -> str:
    """``text`` for HTML: controls escaped, then ``<``, ``>``, ``&`` and quotes escaped."""
    return html.escape(for_terminal(text), quote=True)


# --- URLs -------------------------------------------------------------------

# What makes a name (a query parameter, a plan key) a credential's. Two kinds of test,
# so that one-word spellings (`accesstoken`, `clientsecret`) match as well as
# `access_token`, `X-Amz-Signature` and `clientSecret`, while `monkey`, `keyword`,
# `keyboard_layout` and `bypass` do not:
# - these anywhere in the name, lowercased, with `-`, `_`, `.` and spaces removed;
_CREDENTIAL_PARTS = (
    "token",
    "secret",
    "passw",
    "passphrase",
    "apikey",
    "accesskey",
    "privatekey",
    "signature",
    "credential",
)
# - these as a whole word of the name (`key`, `api_key`, `X-Api-Key`, `AWSAccessKeyId`).
# `code` is left out: a country or a status code is far more common in a plan than
# an OAuth code.
_CREDENTIAL_WORDS = frozenset(
    {"auth", "authorization", "jwt", "key", "pass", "passwd", "pw", "pwd", "sig"}
)
_NAME_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_NAME_SEPARATORS = re.compile(r"[-_. ]+")
REDACTED = "***"


@lru_cache(maxsize=4096)  # plans repeat a few dozen key names thousands of times
def is_credential_name(name: str) -> bool:
    """True for a name that a credential goes by: ``password``, ``api_key``, ``AUTH_TOKEN``,
    ``accesstoken``, ``X-Amz-Credential``, ``pw``... The one list of such names, used for
    query parameters (:func:`redact_url`, ``plan validate``) and plan keys alike."""
    name = unquote(name)
    squashed = _NAME_SEPARATORS.sub("", name.lower())
    if any(part in squashed for part in _CREDENTIAL_PARTS):
        return True
    return any(word.lower() in _CREDENTIAL_WORDS for word in _NAME_WORDS.findall(name))


def is_sensitive_param(name: str) -> bool:
    """True for a query parameter named like a credential (``sig``, ``X-Amz-Credential``...)."""
    return is_credential_name(name)


def split_url(url: str) -> tuple[str, str, str, str | None, str | None] | None:
    """``(scheme, userinfo, rest-of-authority-and-path, query, fragment)``, or None
    when ``url`` has no ``://``. An absent query or fragment is None; an empty one "".

    Deliberately looser than RFC 3986: the user info runs to the *last* ``@``
    before the query, so ``user:pa/ss@host`` and ``user:p@ss@host`` are read as
    user info, not as a path. Reading too much as user info hides a little more;
    reading too little would show a password.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    rest, hash_, fragment = rest.partition("#")
    rest, mark, query = rest.partition("?")
    userinfo, _, hostpath = rest.rpartition("@")
    return scheme, userinfo, hostpath, query if mark else None, fragment if hash_ else None


def sensitive_params(query: str) -> list[str]:
    """The names of credential-like parameters with a value in a query (or fragment)."""
    found = []
    for pair in re.split(r"[&;]", query):
        name, eq, value = pair.partition("=")
        if eq and value and is_sensitive_param(name):
            found.append(unquote(name))
    return found


def _redact_query(query: str) -> str:
    parts = []
    for pair in re.split(r"([&;])", query):
        name, eq, value = pair.partition("=")
        parts.append(f"{name}={REDACTED}" if eq and value and is_sensitive_param(name) else pair)
    return "".join(parts)


def redact_url(url: str) -> str:
    """``url`` fit to print or store: no user info, no values of credential-like parameters.

    ``http://admin:pw@host/x?sig=abc&n=1`` -> ``http://***@host/x?sig=***&n=1``. Text
    that is not a URL is returned with its control characters escaped, nothing more.
    """
    parts = split_url(url)
    if parts is None:
        return for_terminal(url)
    scheme, userinfo, hostpath, query, fragment = parts
    out = f"{scheme}://" + (f"{REDACTED}@" if userinfo else "") + hostpath
    if query is not None:
        out += "?" + _redact_query(query)
    if fragment is not None:
        out += "#" + _redact_query(fragment)
    return for_terminal(out)

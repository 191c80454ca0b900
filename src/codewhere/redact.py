"""Secrets out of what codewhere shows an agent: Yelp's detect-secrets detectors, line by line.

detect-secrets is the maintained detector (one plugin per credential format, kept up to date by
its authors); its two entropy plugins are left out, since on source code they flag identifiers
and paths in every line. Its plugins are called directly with its heuristic filters, not
through `scan_line`, whose per-call argument injection cost 250 µs a line (70 µs this way);
and a cheap test first skips lines that hold neither a long token nor a credential word, which
every detector here needs. benchmarks/redact_bench.py measures both, and that the findings
match `scan_line`'s.
"""

from __future__ import annotations

import re
from functools import lru_cache

from detect_secrets.filters import heuristic
from detect_secrets.settings import get_plugins, transient_settings

REDACTED = "[REDACTED]"
DETECTORS = (
    "AWSKeyDetector", "ArtifactoryDetector", "AzureStorageKeyDetector", "BasicAuthDetector", "CloudantDetector",
    "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector", "IbmCloudIamDetector",
    "IbmCosHmacDetector", "JwtTokenDetector", "KeywordDetector", "MailchimpDetector", "NpmDetector",
    "OpenAIDetector", "PrivateKeyDetector", "PypiTokenDetector", "SendGridDetector", "SlackDetector",
    "SoftlayerDetector", "SquareOAuthDetector", "StripeDetector", "TelegramBotTokenDetector", "TwilioKeyDetector",
)
# What detect-secrets 1.5 misses when it sees one line without its file type (an unquoted value
# in a YAML, .env or INI line; an Authorization header's literal; Google API keys; generic
# `sk-` keys; PyPI tokens). Group 1, where a pattern has one, is the secret.
_CREDENTIAL_WORD = r"(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret)"
EXTRA_PATTERNS = (
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}\b"),
    re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    re.compile(r"(?i)\b(?:basic|bearer|token)\s+([A-Za-z0-9+/=._~-]{16,})"),
    # KEY=value with a value that is a literal (letters and digits), not code (`getpass()`, `os.environ`)
    re.compile(rf"(?i)\b[\w.-]*{_CREDENTIAL_WORD}[\w.-]*['\"]?\s*[:=]\s*(?=[^\s'\"]*\d)(?=[^\s'\"]*[A-Za-z])"
               r"([^\s'\"#;,()\[\]{}<>]{8,})(?=\s|$|[;,#])"),
)
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]")
_TOKEN_START_CHARS = re.compile(r"[A-Za-z0-9+/_.~-]")  # leftwards, `=` ends a name (`KEY=value`)
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)
# every detector above needs a token of 16+ characters, or a word like these in the line
_MAY_HOLD_SECRET = re.compile(r"[A-Za-z0-9+/=_.:-]{16,}|(?i:pass|pwd|secret|key|token|auth|cred|://|@)")
MIN_SECRET_CHARS = 3  # shorter "secrets" (`pass = ""`, `key = 'a'`) are not worth hiding, and break lines


def _settings() -> dict[str, object]:
    return {"plugins_used": [{"name": name} for name in DETECTORS]}


@lru_cache(maxsize=1)
def _plugins() -> tuple[object, ...]:
    with transient_settings(_settings()):
        return tuple(get_plugins())


def _filtered_out(value: str, line: str, plugin: object) -> bool:
    """detect-secrets' heuristics for what is not a secret (a template, `$VAR`, and for a
    keyword match, `password = get_password()`)."""
    return (heuristic.is_sequential_string(value) or heuristic.is_potential_uuid(value)
            or heuristic.is_templated_secret(value) or heuristic.is_prefixed_with_dollar_sign(value)
            or (type(plugin).__name__ == "KeywordDetector" and heuristic.is_indirect_reference(line)))


def secrets_in_line(line: str) -> set[str]:
    """The secret values the detectors find in one line."""
    if not _MAY_HOLD_SECRET.search(line):
        return set()
    found = {value for plugin in _plugins() for value in plugin.analyze_string(line)  # type: ignore[attr-defined]
             if value and not _filtered_out(value, line, plugin)}
    found.update(m.group(m.lastindex or 0) for pattern in EXTRA_PATTERNS for m in pattern.finditer(line))
    return {value for value in found if len(value) >= MIN_SECRET_CHARS}


def _whole_tokens(line: str, value: str) -> list[tuple[int, int]]:
    """Where `value` occurs in `line`, each span widened to the whole token around it: a detector
    that matches a token's prefix (a JWT's header, a GitHub token of unusual length) must not leave
    the rest of it showing."""
    spans = []
    at = line.find(value)
    while at >= 0:
        start, end = at, at + len(value)
        while start > 0 and _TOKEN_START_CHARS.match(line[start - 1]):
            start -= 1
        while end < len(line) and _TOKEN_CHARS.match(line[end]):
            end += 1
        spans.append((start, end))
        at = line.find(value, at + len(value))
    return spans


def _redact_line(line: str) -> str:
    spans = sorted(span for value in secrets_in_line(line) for span in _whole_tokens(line, value))
    if not spans:
        return line
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    out, last = [], 0
    for start, end in merged:
        out += [line[last:start], REDACTED]
        last = end
    return "".join(out) + line[last:]


@lru_cache(maxsize=4096)
def redact(text: str) -> str:
    """`text` with every secret value replaced by [REDACTED]; names and quotes stay, so the
    code still reads (`password = "[REDACTED]"`). Cached: an agent sees the same hits again."""
    text = _PRIVATE_KEY.sub(REDACTED, text)
    return "\n".join(_redact_line(line) for line in text.split("\n"))

"""The resolved config's own digest: ``config.resolved.yaml`` ends its header with ``# sha256: <hex>``, the
SHA-256 of the settings below it, so a truncated or edited file is refused on read instead of being filled
with defaults (a resume, ``vfl report``, ``vfl verify``)."""

from __future__ import annotations

import hashlib

DIGEST = "# sha256: "


def config_digest(body: str) -> str:
    """SHA-256 (hex) of the settings' text (the YAML below the header)."""
    return hashlib.sha256(body.encode()).hexdigest()


def split_config(text: str) -> tuple[list[str], str, str | None]:
    """(header comment lines, the settings' text, the digest the header states or None: an older file)."""
    lines = text.splitlines(keepends=True)
    head: list[str] = []
    while lines and lines[0].startswith("#"):
        head.append(lines.pop(0).rstrip("\n"))
    stated = next((h[len(DIGEST):].strip() for h in head if h.startswith(DIGEST)), None)
    return head, "".join(lines), stated


def check_config_text(text: str) -> str | None:
    """Why ``text`` is not the config its writer wrote (None: it is, or it is from before digests)."""
    _, body, stated = split_config(text)
    if stated is None:
        return None
    if config_digest(body) != stated:
        return (f"its settings do not match the digest it was written with ({DIGEST.strip('# ')}{stated[:12]}..., "
                f"now {config_digest(body)[:12]}...): truncated or edited")
    return None

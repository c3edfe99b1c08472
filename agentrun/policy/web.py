"""A web tool's URL under the policy: http and https only, and with `allow_domains` only those hosts
(`*.example.com` is the domain and its subdomains, `*` any host), as the Agentfile's real system
matches them. The host is read with httpx, the parser web_fetch connects with, so the host checked
is the host reached; which addresses it has is the tool's to check (tools.addresses)."""

from __future__ import annotations

import httpx

from agentrun.models.tools import ToolRule


def refusal(rule: ToolRule, tool: str, url: str) -> str | None:
    """Why `tool` may not reach `url` under its table `rule`, or None."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as e:
        return f"not a URL: {url} ({e})"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return f"{tool} reaches http and https URLs only, not {url}"
    return domain_refusal(rule, tool, parsed.host)


def domain_refusal(rule: ToolRule, tool: str, host: str) -> str | None:
    """Why `tool` may not reach `host` under `allow_domains`, or None (no list: any host)."""
    if not rule.allow_domains:
        return None
    host = host.lower().rstrip(".")
    for pattern in rule.allow_domains:
        pattern = pattern.lower()
        if pattern == "*" or pattern == host:
            return None
        if pattern.startswith("*.") and (host.endswith(pattern[1:]) or host == pattern[2:]):
            return None
    return f"domain {host} is not in the policy's allow_domains for {tool}"

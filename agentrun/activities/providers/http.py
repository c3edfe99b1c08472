"""The `http` provider: one HTTP request, returning the response body as text.

    provider: http
    method: get | post | put | delete
    params: url (required), headers, params (query string), json or data (body), timeout_s (30)

Each request carries the step's Idempotency-Key header (activities.keys), the same on a retry.

No retries here: Temporal's retry policy retries the whole activity, and we only say whether
that could help (5xx, 408, 429 and network errors: yes; other 4xx and bad params: no).
"""

from __future__ import annotations

from typing import Any

import httpx

from agentrun.activities import keys
from agentrun.activities.providers.base import BadParams, ProviderError, check_keys, get_timeout
from agentrun.activities.providers.process import tail

DEFAULT_TIMEOUT_S = 30.0
METHODS = ("get", "post", "put", "delete")
_ALLOWED = ("url", "headers", "params", "json", "data", "timeout_s")
# Client errors that mean "not now" rather than "never".
_RETRYABLE_4XX = frozenset({408, 429})


class HttpProvider:
    async def call(self, method: str, params: dict[str, Any], workdir: str) -> str:
        verb = method.lower()
        where = f"http.{verb}"
        if verb not in METHODS:
            raise BadParams(f"http: unknown method {method!r}; known methods: {list(METHODS)}")
        check_keys(where, params, _ALLOWED, required=("url",))
        request = _request_args(where, params)
        timeout_s = get_timeout(where, params, DEFAULT_TIMEOUT_S)
        url = params["url"]
        async with httpx.AsyncClient(follow_redirects=True, timeout=timeout_s) as client:
            try:
                response = await client.request(verb.upper(), url, **request)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as e:
                raise BadParams(f"{where}: bad url {url!r}: {e}") from e
            except httpx.TimeoutException as e:
                raise ProviderError(
                    f"{where} {url} timed out after {timeout_s:g}s",
                    retryable=True,
                    kind="HttpTimeout",
                ) from e
            except httpx.TransportError as e:
                raise ProviderError(f"{where} {url} failed: {e!r}", retryable=True, kind="HttpConnectionError") from e
        _raise_for_status(verb, url, response)
        return response.text


def _request_args(where: str, params: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(params["url"], str):
        raise BadParams(f"{where}: `url` must be a string, got {params['url']!r}")
    if "json" in params and "data" in params:
        raise BadParams(f"{where}: give at most one of `json` or `data`")
    for key in ("headers", "params"):
        if not isinstance(params.get(key, {}), dict):
            raise BadParams(f"{where}: `{key}` must be a map, got {params[key]!r}")
    # The key lets the server recognise a retry of this call (Temporal retries after a lost worker);
    # a key the spec sets wins.
    headers = {**keys.as_header(), **(params.get("headers") or {})}
    args: dict[str, Any] = {"headers": headers, "params": params.get("params")}
    if "json" in params:
        args["json"] = params["json"]
    data = params.get("data")
    # httpx wants raw text as `content` and form fields as `data`.
    if isinstance(data, str | bytes):
        args["content"] = data
    elif isinstance(data, dict):
        args["data"] = data
    elif data is not None:
        raise BadParams(f"{where}: `data` must be a string or a map, got {data!r}")
    return args


def _raise_for_status(verb: str, url: str, response: httpx.Response) -> None:
    code = response.status_code
    if code < 400:
        return
    retryable = code >= 500 or code in _RETRYABLE_4XX
    body = tail(response.text, 1000)
    raise ProviderError(
        f"http.{verb} {url} -> {code} {response.reason_phrase}" + (f": {body}" if body else ""),
        retryable=retryable,
        kind=f"HttpStatus{code}",
    )

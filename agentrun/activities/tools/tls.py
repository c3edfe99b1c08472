"""One TLS context for the web tools, made once a worker: building one reads the system's
certificates, about half a second, which a call should not pay each time."""

from __future__ import annotations

import functools
import ssl


@functools.cache
def context() -> ssl.SSLContext:
    return ssl.create_default_context()

"""The fakes' HTTP server: a client that went away mid-request (a worker killed with kill -9, as the
crash tests do) is what the tests make happen, not an error to print a traceback for."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

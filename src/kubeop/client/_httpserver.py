"""The old path of :mod:`kubeop.client.httpserver`, kept while kubeop.manager still imports it.

Never public (the underscore); nothing new imports it. It goes once kubeop.manager imports
``kubeop.client.httpserver``.
"""

from kubeop.client.httpserver import Authorize, HttpServer, Limits, Request, Response, Route, parse_address

__all__ = ["Authorize", "HttpServer", "Limits", "Request", "Response", "Route", "parse_address"]

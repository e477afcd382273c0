"""The request path writes only to the broker: a request the proxy answers itself is queued and flagged, and the
core sends the answers whose turn has come (issue 36: the request path wrote to the client)."""

import inspect

from proxy.connection import request_path
from proxy.connection.request_path import RequestPath


def test_the_request_path_is_not_given_the_client_writer_nor_the_response_path():
    parameters = inspect.signature(RequestPath.__init__).parameters
    assert "responses" not in parameters
    source = inspect.getsource(request_path)
    assert "send_ready_local" not in source and "ResponsePath" not in source

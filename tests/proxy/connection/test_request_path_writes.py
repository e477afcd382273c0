"""The request path writes only to the broker: a request the proxy answers itself is queued and flagged, and the
core sends the answers whose turn has come (issue 36: the request path wrote to the client)."""

import inspect

from proxy.connection import request_frames, request_path
from proxy.connection.request_frames import PureRequests


def test_the_request_path_is_not_given_the_client_writer_nor_the_response_path():
    # the pure base's (the C twin's takes the same, and RequestPath adds no constructor)
    parameters = inspect.signature(PureRequests.__init__).parameters
    assert "responses" not in parameters and "write_client" not in parameters and "forward" in parameters
    for module in (request_path, request_frames):
        source = inspect.getsource(module)
        assert "send_ready_local" not in source and "ResponsePath" not in source

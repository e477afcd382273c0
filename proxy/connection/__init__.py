"""The connection runtime: client and broker sockets, the flow state machine, the request and response paths."""

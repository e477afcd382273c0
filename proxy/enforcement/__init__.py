"""The quota managers a running proxy holds, consulted on the request path."""

"""Usage shared between processes (workers) and proxies (the usage topic): what is sent and how it is applied."""

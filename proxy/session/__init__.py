"""Who a connection is: SASL and TLS principals."""

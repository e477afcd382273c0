"""Command lines: kafka-quota-proxy run, configs and analyze."""

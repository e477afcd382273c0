"""Operations: metrics, the HTTP endpoint, readiness, logs and the usage log."""

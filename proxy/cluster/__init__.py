"""What the proxy knows about the cluster (brokers, their ports, topics) and the proxy's own Kafka clients."""

"""The flow object (proxy.connection.flow): see test_flow_machine.py for the stateful property test."""

"""The flow object (proxy.flow): see test_flow_machine.py for the stateful property test."""

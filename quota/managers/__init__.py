"""The quota managers: each keeps its entities' state and returns decisions."""

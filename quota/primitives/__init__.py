"""The parts the managers are built of: rates, sensors, token buckets, throttle formulas, entities, the clock."""

"""``workers: N``: N proxy processes on the same listeners (SO_REUSEPORT) under one supervising parent, sharing one
quota state (:mod:`quota.sharing.usage_share`) through the parent: each worker sends its usage deltas every
``quota.workers.sync.ms``, the parent fans them out to the others."""

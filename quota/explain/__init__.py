"""Why a client is (or is not) throttled, from the quota state: ``kafka-quota-proxy explain`` and ``/explain``."""

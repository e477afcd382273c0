"""``make demo`` (``python -m demo``): Tansu, the proxy in front of it and clients showing every quota at work.

Lives in the repository only: neither in the wheel nor in the container image; the proxy never imports it.
"""

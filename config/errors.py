"""The one error a bad configuration raises: it names the key path and the reason."""


class ConfigError(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def mapping_with(raw, path: str, known: set[str], required: set[str] = frozenset()) -> dict:
    """``raw`` as a mapping of only ``known`` keys with every ``required`` one; else a ConfigError naming the key."""
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in known:
            raise ConfigError(f"{path}.{key}", f"unknown key (known keys: {', '.join(sorted(known))})")
    for key in sorted(required):
        if key not in raw:
            raise ConfigError(f"{path}.{key}", "required key is missing")
    return raw

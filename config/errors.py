"""The one error a bad configuration raises: it names the key path and the reason."""


class ConfigError(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def mapping_with(raw, path: str, known: set[str], required: set[str] = frozenset()) -> dict:
    """``raw`` as a mapping of only ``known`` keys with every ``required`` one; else a ConfigError naming the key."""
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping, got {show(raw)}")
    for key in raw:
        if key not in known:
            raise ConfigError(join(path, key), f"unknown key (known keys: {', '.join(sorted(known))})")
    for key in sorted(required):
        if key not in raw:
            raise ConfigError(join(path, key), "required key is missing")
    return raw


def join(path: str, key) -> str:
    """A key's path below ``path`` (the top level has none)."""
    return f"{path}.{key}" if path else str(key)


def show(value) -> str:
    """A value as an error message shows it: a mapping or list by its kind, anything else as written."""
    if isinstance(value, (dict, list)):
        return type(value).__name__
    return repr(value)

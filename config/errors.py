"""The one error a bad configuration raises: it names the key path and the reason."""


class ConfigError(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason

"""What the handlers of the proxy's own admin APIs (Describe/AlterClientQuotas, Describe/IncrementalAlterConfigs of
the proxy-wide settings) need of the dynamic configuration: the configuration in force and its entries, to read; the
config topic, to write. The writer audits what it writes (who asked, from where, through which API), so a handler
only says who asked. A running proxy's is :class:`proxy.observers.dynamic_config.DynamicConfig`: the planning code
knows it by this interface alone, as it knows every other part of the runtime by the values it reads."""

from __future__ import annotations

from typing import Protocol

from config.dynamic import DynamicEntries, Record
from config.model import ProxyConfig


class ConfigTopic(Protocol):
    @property
    def base(self) -> ProxyConfig:
        """The configuration read from the YAML file, under every entry of the topic."""
        ...

    @property
    def current(self) -> ProxyConfig:
        """The effective configuration in force (the YAML with the topic's entries laid over it)."""
        ...

    @property
    def entries(self) -> DynamicEntries:
        """The topic's entries in force."""
        ...

    async def write(self, records: list[Record], principal: str, address: str, via: str) -> None:
        """Append ``records`` that ``principal`` at ``address`` asked for through the API ``via`` (audited); raises
        when they could not be written, in bounded time."""
        ...

    def write_failure(self, exc: BaseException) -> str:
        """What the answer says when :meth:`write` raised ``exc``."""
        ...

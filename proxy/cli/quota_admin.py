"""The ``configs`` command's requests, as kafka-configs.sh sends them, over kafka-python's admin client connection.

KafkaAdminClient has no client-quota methods, and its config methods take a BROKER resource only by broker id (not
``""``, the cluster default), so the requests are kafka-python's own protocol classes sent on the admin client's
connection manager. Each answer is checked: an error code from the server is :class:`Failed`
with the server's message; a server whose ApiVersions does not list an API, or that closes the connection on it
(as Tansu does for the client-quota APIs), is said to be one that does not serve them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from config.dynamic import DYNAMIC_SETTINGS
from proxy.codec.enums import BROKER_RESOURCE, DELETE, MATCH_TYPE_DEFAULT, MATCH_TYPE_EXACT, MATCH_TYPE_SPECIFIED, SET
from proxy.codec.error_codes import error_name
from quota.primitives.entity import DEFAULT

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

CLIENT_ID = "kafka-quota-proxy-configs"
TIMEOUT_MS = 15000
EXIT_FAILED, EXIT_USAGE = 1, 2
NOT_SERVED = (
    "this server does not serve the client-quota APIs: point --bootstrap-server at the proxy, with a "
    "dynamic config enabled"
)
SETTINGS_NOT_SERVED = (
    "this server does not serve the proxy's settings: point --bootstrap-server at the proxy, "
    "with a dynamic config enabled"
)


class Failed(Exception):
    """The command cannot be done; ``code`` is the exit code, the message is printed."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


class QuotaAdmin:
    def __init__(self, bootstrap: str, security: dict) -> None:
        self.bootstrap, self.security = bootstrap, dict(security)
        self._admin: KafkaAdminClient | None = None  # connected in the with block

    def __enter__(self) -> QuotaAdmin:
        from kafka.admin import KafkaAdminClient

        options = {"client_id": CLIENT_ID, **self.security}
        try:
            self._admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap,
                request_timeout_ms=TIMEOUT_MS,
                bootstrap_timeout_ms=TIMEOUT_MS,
                **options,
            )
        except Exception as exc:  # noqa: BLE001 - a command line reports and exits
            raise Failed(f"cannot connect to {self.bootstrap}: {type(exc).__name__}: {exc}") from None
        return self

    def __exit__(self, *exc) -> None:
        if self._admin is not None:
            self._admin.close()

    def _connected(self) -> KafkaAdminClient:
        if self._admin is None:
            raise RuntimeError("QuotaAdmin used outside its with block")
        return self._admin

    # -- the wire ---------------------------------------------------------------------------------------------------

    def _version(self, request_class, not_served: str, highest: int, lowest: int = 0) -> int:
        from kafka.errors import IncompatibleBrokerVersion

        try:
            return self._connected()._manager.broker_version_data.api_version(
                request_class, min_version=lowest, max_version=highest
            )
        except IncompatibleBrokerVersion:
            raise Failed(f"{not_served} (its ApiVersions does not list {request_class.__name__[:-7]})") from None

    def _send(self, request, not_served: str):
        from kafka.errors import KafkaConnectionError, KafkaError

        admin = self._connected()

        async def call():
            return await admin._manager.send(request)

        try:
            return admin._manager.run(call)
        except KafkaConnectionError as exc:
            raise Failed(f"{not_served} (it closed the connection on {type(request).__name__[:-7]}: {exc})") from None
        except KafkaError as exc:
            raise Failed(f"{type(request).__name__[:-7]} failed: {type(exc).__name__}: {exc}") from None

    # -- client quotas ----------------------------------------------------------------------------------------------

    def describe_quotas(self, entity: dict, strict: bool) -> list[tuple[dict, dict]]:
        """DescribeClientQuotas: each component a name (exact), ``<default>`` or None (any name)."""
        from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest as R

        version = self._version(R, NOT_SERVED, 1)
        components = [
            R.ComponentData(
                entity_type=kind,
                match_type=MATCH_TYPE_SPECIFIED
                if name is None
                else MATCH_TYPE_DEFAULT
                if name == DEFAULT
                else MATCH_TYPE_EXACT,
                match=None if name in (None, DEFAULT) else name,
            )
            for kind, name in entity.items()
        ]
        response = self._send(R(version=version, strict=strict, components=components), NOT_SERVED)
        if response.error_code:
            raise Failed(f"refused by the server ({error_name(response.error_code)}): {response.error_message}")
        out = []
        for entry in response.entries or []:
            found = {e.entity_type: DEFAULT if e.entity_name is None else e.entity_name for e in entry.entity}
            out.append((found, {v.key: v.value for v in entry.values}))
        return sorted(out, key=lambda item: sorted(item[0].items()))

    def alter_quotas(self, entity: dict, added: dict, deleted: list[str]) -> None:
        from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as R

        version = self._version(R, NOT_SERVED, 1)
        ops = [R.EntryData.OpData(key=k, value=float(v), remove=False) for k, v in added.items()]
        ops += [R.EntryData.OpData(key=k, value=0.0, remove=True) for k in deleted]
        parts = [
            R.EntryData.EntityData(entity_type=kind, entity_name=None if name == DEFAULT else name)
            for kind, name in entity.items()
        ]
        request = R(version=version, validate_only=False, entries=[R.EntryData(entity=parts, ops=ops)])
        for entry in self._send(request, NOT_SERVED).entries:
            if entry.error_code:
                raise Failed(f"refused by the server ({error_name(entry.error_code)}): {entry.error_message}")

    # -- proxy settings (the BROKER resource "") ---------------------------------------------------------------------

    def describe_settings(self) -> dict[str, tuple[str, int]]:
        """name -> (value, config_source) of every proxy setting."""
        from kafka.protocol.admin import DescribeConfigsRequest as R

        version = self._version(R, SETTINGS_NOT_SERVED, 4, lowest=1)  # v1+: config_source
        request = R(
            version=version,
            resources=[
                R.DescribeConfigsResource(
                    resource_type=BROKER_RESOURCE, resource_name="", configuration_keys=list(DYNAMIC_SETTINGS)
                )
            ],
            include_synonyms=False,
            **({"include_documentation": False} if version >= 3 else {}),
        )
        [result] = self._send(request, SETTINGS_NOT_SERVED).results
        if result.error_code:
            raise Failed(f"refused by the server ({error_name(result.error_code)}): {result.error_message}")
        found = {c.name: (c.value, c.config_source) for c in result.configs}
        if "quota.mode" not in found:  # a Kafka broker: it knows max.connections, not the proxy's quota.mode
            raise Failed(SETTINGS_NOT_SERVED)
        return {name: found[name] for name in DYNAMIC_SETTINGS if name in found}

    def alter_settings(self, added: dict[str, str], deleted: list[str]) -> None:
        from kafka.protocol.admin import IncrementalAlterConfigsRequest as R

        version = self._version(R, SETTINGS_NOT_SERVED, 1)
        configs = [
            R.AlterConfigsResource.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in added.items()
        ]
        configs += [
            R.AlterConfigsResource.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in deleted
        ]
        request = R(
            version=version,
            validate_only=False,
            resources=[R.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name="", configs=configs)],
        )
        for result in self._send(request, SETTINGS_NOT_SERVED).responses:
            if result.error_code:
                raise Failed(f"refused by the server ({error_name(result.error_code)}): {result.error_message}")

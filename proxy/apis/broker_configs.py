"""The proxy-wide dynamic settings through IncrementalAlterConfigs (44) and DescribeConfigs (32), as Kafka's own
cluster-wide dynamic broker configs: ``kafka-configs.sh --entity-type brokers --entity-default``.

Served by the proxy when a dynamic config is configured, for the BROKER resource named ``""`` (the cluster default)
whose config names are all proxy settings (:data:`config.dynamic.DYNAMIC_SETTINGS`); every other resource goes to the
broker, and the broker's per-resource answers are merged with the proxy's, in request order (forward part and merge).

- IncrementalAlterConfigs: only principals in ``admin_principals`` and the admin listener's connections (anyone
  else: CLUSTER_AUTHORIZATION_FAILED with a message). ``SET`` (0) and ``DELETE`` (1); ``APPEND``/``SUBTRACT`` and a
  name given twice are INVALID_REQUEST; a BROKER ``""`` resource mixing proxy settings with other names is
  INVALID_REQUEST naming the others. The result is checked as the config topic's reader checks it (INVALID_CONFIG
  with the reason); ``validate_only`` stops there.
  The proxy-wide record is then written to the config topic (merged: the names not altered keep their dynamic
  values), and the answer goes back once the write is acknowledged, as for AlterClientQuotas.
- DescribeConfigs: open to everyone, as DescribeClientQuotas is. A BROKER ``""`` resource naming only proxy settings
  is answered from the effective configuration (``config_source``: dynamic default, static (the YAML) or default).
  One that names no keys (null or empty: "every config") goes to the broker, whose configs those are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from config.dynamic import DYNAMIC_SETTINGS, PROXY_KEY, RecordError, entity_key
from config.settings import parse_settings
from config.settings_table import IP_OVERRIDES, QUOTA_MODE, QUOTA_SMOOTHING, SETTINGS
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, Await, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from proxy.codec.enums import (
    BROKER_RESOURCE,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    INT_TYPE,
    SET,
    STATIC_BROKER_CONFIG,
    STRING_TYPE,
)
from proxy.codec.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_CONFIG,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_SERVER_ERROR,
)
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, encode_response, new_response
from proxy.codec.responses import encode_local_response
from proxy.session.session import Session

if TYPE_CHECKING:
    from config.dynamic import Record
    from proxy.apis.config_topic import ConfigTopic

Result = tuple[int, "str | None"]  # one resource's (error code, message)
Entry = dict[str, object]  # one DescribeConfigs config entry, as the codec builds it
Answer = Result | list[Entry]  # what the proxy answers for one resource: a result, or (DescribeConfigs) its entries

CLUSTER_DEFAULT = ""  # the BROKER resource named "": every broker's default (kafka-configs --entity-default)
DEFAULTS = parse_settings(None, "settings").values
PROXY_RECORD_KEY = entity_key(PROXY_KEY)


def proxy_names(resource: Message, names: list[str]) -> bool | None:
    """True: the resource is the proxy's (BROKER "" naming only proxy settings); False: the broker's; None: a BROKER
    "" resource mixing both (refused)."""
    if resource.resource_type != BROKER_RESOURCE or resource.resource_name != CLUSTER_DEFAULT or not names:
        return False
    ours = [n for n in names if n in DYNAMIC_SETTINGS]
    if not ours:
        return False
    return True if len(ours) == len(names) else None


def mixed_message(names: list[str]) -> str:
    others = sorted({n for n in names if n not in DYNAMIC_SETTINGS})
    return (
        f"{', '.join(others)}: not proxy settings; send them in a request of their own (the proxy-wide settings "
        f"{', '.join(DYNAMIC_SETTINGS)} are the proxy's, the rest the broker's)"
    )[:500]


# -- IncrementalAlterConfigs ------------------------------------------------------------------------------------------


def plan_incremental_alter(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if scope.client_quotas is None:
        return PASS
    dynamic: ConfigTopic = scope.client_quotas
    version, correlation_id = header.api_version, header.correlation_id

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(INCREMENTAL_ALTER_CONFIGS, version, body)
        ours: dict[int, Answer] = {}  # request index -> (error code, message)
        wanted = []  # (index, resource) of the proxy's resources, to check and write
        for i, resource in enumerate(msg.resources):
            kind = proxy_names(resource, [c.name for c in resource.configs])
            if kind is None:
                ours[i] = (INVALID_REQUEST, mixed_message([c.name for c in resource.configs]))
            elif kind:
                wanted.append((i, resource))
        if not ours and not wanted:
            return FORWARD_AS_IS
        records: list[Record] = []
        if wanted and not session.is_admin(dynamic.base.admin_principals):
            reason = (
                f"User:{session.user} may not alter the proxy's settings (admin_principals in the proxy's "
                "configuration, or its admin listener)"
            )
            ours.update({i: (CLUSTER_AUTHORIZATION_FAILED, reason) for i, _ in wanted})
        elif wanted:
            results, records = check(dynamic, [r for _, r in wanted])
            ours.update({i: result for (i, _), result in zip(wanted, results)})
        if msg.validate_only:
            records = []
        return answer_and_forward(
            INCREMENTAL_ALTER_CONFIGS,
            version,
            correlation_id,
            msg,
            ours,
            "responses",
            records,
            dynamic,
            (f"User:{session.user}", session.peer_ip, session.through("IncrementalAlterConfigs")),
        )

    return Plan(action=BUFFER, decide=decide)


def check(dynamic: ConfigTopic, resources: Iterable[Message]) -> tuple[list[Result], list[Record]]:
    """Each resource's (error code, message), and the proxy-wide records of the valid ones (one after another, as
    the topic's reader will apply them)."""
    state = dynamic.entries
    results: list[Result] = []
    records: list[Record] = []
    for resource in resources:
        current: dict[str, object] = (
            dict(state.entries[PROXY_RECORD_KEY][1]) if PROXY_RECORD_KEY in state.entries else {}
        )
        names = [c.name for c in resource.configs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            results.append((INVALID_REQUEST, f"{', '.join(twice)}: given more than once"))
            continue
        refused: Result | None = None
        for config in resource.configs:
            if config.config_operation == DELETE:
                current.pop(config.name, None)
            elif config.config_operation != SET:
                refused = (
                    INVALID_REQUEST,
                    f"{config.name}: only SET (0) and DELETE (1) apply to proxy settings, "
                    f"got operation {config.config_operation}",
                )
                break
            elif config.value is None:
                refused = (INVALID_CONFIG, f"{config.name}: SET needs a value")
                break
            else:
                current[config.name] = setting_value(config.name, config.value)
        if refused is not None:
            results.append(refused)
            continue
        value = json.dumps(current, sort_keys=True).encode() if current else None
        try:
            state = state.with_record(dynamic.base, PROXY_RECORD_KEY, value)
        except RecordError as exc:
            results.append((INVALID_CONFIG, str(exc)[:500]))
            continue
        records.append((PROXY_RECORD_KEY, value))
        results.append((NONE, None))
    return results, records


def setting_value(name: str, text: str) -> str | int | float:
    """A config value as the wire carries it (a string) into the config topic's JSON: numbers for the numeric
    settings (the check then names anything that is not one), strings for the others."""
    if name in (IP_OVERRIDES, QUOTA_MODE, QUOTA_SMOOTHING):
        return text
    for kind in (int, float):
        try:
            return kind(text.strip())
        except ValueError:
            pass
    return text


# -- DescribeConfigs ----------------------------------------------------------------------------------------------------


def plan_describe(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    if scope.client_quotas is None:
        return PASS
    dynamic: ConfigTopic = scope.client_quotas
    version, correlation_id = header.api_version, header.correlation_id

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(DESCRIBE_CONFIGS, version, body)
        ours: dict[int, Answer] = {}
        for i, resource in enumerate(msg.resources):
            kind = proxy_names(resource, list(resource.configuration_keys or ()))
            if kind is None:
                ours[i] = (INVALID_REQUEST, mixed_message(list(resource.configuration_keys)))
            elif kind:
                ours[i] = described(
                    dynamic, resource.configuration_keys, version, getattr(msg, "include_documentation", False)
                )
        if not ours:
            return FORWARD_AS_IS
        return answer_and_forward(DESCRIBE_CONFIGS, version, correlation_id, msg, ours, "results", [], dynamic)

    return Plan(action=BUFFER, decide=decide)


def described(dynamic: ConfigTopic, names: Iterable[str], version: int, documentation: bool) -> list[Entry]:
    """The effective values of ``names`` (proxy settings), as DescribeConfigs entries."""
    values = dynamic.current.settings.values
    entries = dynamic.entries.entries
    overridden = entries[PROXY_RECORD_KEY][1] if PROXY_RECORD_KEY in entries else {}
    yaml = dynamic.base.settings.values
    out: list[Entry] = []
    for name in dict.fromkeys(names):
        if name in overridden:
            source = DYNAMIC_DEFAULT_BROKER_CONFIG
        elif yaml[name] != DEFAULTS[name]:
            source = STATIC_BROKER_CONFIG
        else:
            source = DEFAULT_CONFIG
        spec = SETTINGS.get(name)
        entry: Entry = {"name": name, "value": shown(values[name]), "read_only": False, "is_sensitive": False}
        if version == 0:
            entry["is_default"] = source == DEFAULT_CONFIG
        else:
            entry["config_source"] = source
        if version >= 3:
            entry["config_type"] = INT_TYPE if spec is not None and spec.kind is int else STRING_TYPE
            entry["documentation"] = spec.doc if documentation and spec is not None else None
        out.append(entry)
    return out


def shown(value: object) -> str:
    if isinstance(value, Mapping):  # max.connections.per.ip.overrides (a read-only mapping), as Kafka writes it
        return ",".join(f"{ip}:{count}" for ip, count in sorted(value.items()))
    if isinstance(value, tuple):  # quota.request.rate.apis, as Kafka lists
        return ",".join(value)
    return str(value)


# -- answering ------------------------------------------------------------------------------------------------------------


def answer_and_forward(
    api_key: int,
    version: int,
    correlation_id: int,
    msg: Message,
    ours: dict[int, Answer],
    field: str,
    records: list[Record],
    dynamic: ConfigTopic,
    author: tuple[str, str, str] = ("", "", ""),
) -> Outcome:
    """Answer the proxy's resources (``ours``: index -> (code, message), or DescribeConfigs entries), after writing
    ``records`` when there are any (asked for by ``author``: principal, address, API; audited by the writer);
    forward the rest and merge the broker's answers in request order."""
    resources = list(msg.resources)

    def result(i: int, outcome: Answer) -> dict[str, object]:
        r = resources[i]
        item: dict[str, object] = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        if isinstance(outcome, list):
            return {**item, "error_code": NONE, "error_message": None, "configs": outcome}
        code, message = outcome
        return {**item, "error_code": code, "error_message": message, **({"configs": []} if field == "results" else {})}

    def outcome(failure: BaseException | None) -> Outcome:
        answers = dict(ours)
        if failure is not None:
            text = dynamic.write_failure(failure)
            answers = {i: (UNKNOWN_SERVER_ERROR, text) if a == (NONE, None) else a for i, a in answers.items()}
        built = getattr(
            new_response(api_key, version, **{field: [result(i, a) for i, a in sorted(answers.items())]}), field
        )
        local = dict(zip(sorted(answers), built))
        rest = [r for i, r in enumerate(resources) if i not in local]
        if not rest:
            response = new_response(api_key, version, **{field: [local[i] for i in range(len(resources))]})
            return AnswerLocally(encode_local_response(api_key, version, correlation_id, response))
        msg.resources = rest
        return ForwardRequest(
            body=encode_request(api_key, version, msg),
            leg=ResponseLeg(rewrite=merger(api_key, version, field, resources, local)),
        )

    if not records:
        return outcome(None)
    return Await(
        start=lambda: dynamic.write(records, *author),
        then=lambda done: outcome(done if isinstance(done, BaseException) else None),
    )


def merger(
    api_key: int, version: int, field: str, resources: list[Message], local: dict[int, Message]
) -> Callable[[memoryview], bytes]:
    def merge(body: memoryview) -> bytes:
        """The broker's results and the proxy's, in the client's request order (a result the proxy cannot place
        goes last)."""
        response = decode_response(api_key, version, body)
        broker: dict[tuple[int, str], list[Message]] = {}
        for r in getattr(response, field):
            broker.setdefault((r.resource_type, r.resource_name), []).append(r)
        merged: list[Message] = []
        for i, resource in enumerate(resources):
            if i in local:
                merged.append(local[i])
                continue
            answered = broker.get((resource.resource_type, resource.resource_name))
            if answered:
                merged.append(answered.pop(0))
        merged += [r for results in broker.values() for r in results]
        setattr(response, field, merged)
        return encode_response(api_key, version, response)

    return merge

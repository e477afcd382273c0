"""``${env:NAME}`` in the configuration, as Kafka's EnvVarConfigProvider writes it: a value taken from the process's
environment when the file is loaded, so one file serves every pod (``broker_id: ${env:KAFKA_NODE_ID}``).

- A plain (unquoted) scalar that is wholly one reference takes the variable's value read as YAML reads a plain
  scalar: ``3`` is an integer, ``true`` a boolean, ``a,b`` a string. An empty value is the empty string.
- A reference inside a longer string, or a quoted one, is replaced by the value as text.
- An unset variable, or ``${env:`` not followed by a variable name and ``}``, is a configuration error naming the key
  path and the variable. Only values are expanded, never keys, and a value is never expanded twice (a value holding
  ``${env:...}`` is kept as it is).

The loader marks wholly-referencing plain scalars while it reads the YAML (:data:`ENV_TAG`); :func:`expand` then walks
the loaded values with their key paths. Pure: the environment is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from config.errors import ConfigError, join

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
WHOLE = re.compile(rf"\$\{{env:({NAME})\}}\Z")  # the plain scalars the loader marks
_START = "${env:"
_REFERENCE = re.compile(rf"\$\{{env:({NAME})\}}|\$\{{env:")  # a reference, or a start that is not one
ENV_TAG = "tag:kafka-quota-proxy,2026:env"  # the loader's private tag for a plain scalar that is one reference


@dataclass(frozen=True, slots=True)
class EnvRef:
    """A plain scalar that is wholly ``${env:NAME}``: its value is read as a YAML scalar when expanded."""

    name: str


def construct_env_ref(loader: Any, node: Any) -> EnvRef:
    text = loader.construct_scalar(node)
    whole = WHOLE.fullmatch(text)
    if whole is None:  # the loader tags only a scalar that is wholly one reference with ENV_TAG
        raise ValueError(f"not an environment reference: {text!r}")
    return EnvRef(whole.group(1))


def expand(raw: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """``raw`` (as the YAML loader made it) with every reference replaced; ConfigError names the key and variable."""
    if isinstance(raw, EnvRef):
        return _scalar(_value(raw.name, environ, path))
    if isinstance(raw, str):
        return _text(raw, environ, path) if _START in raw else raw
    if isinstance(raw, dict):
        return {key: expand(value, environ, join(path, key)) for key, value in raw.items()}
    if isinstance(raw, list):
        return [expand(value, environ, f"{path}[{i}]") for i, value in enumerate(raw)]
    return raw


def _value(name: str, environ: Mapping[str, str], path: str) -> str:
    try:
        return environ[name]
    except KeyError:
        raise ConfigError(path, f"${{env:{name}}}: the environment variable {name} is not set") from None


def _text(raw: str, environ: Mapping[str, str], path: str) -> str:
    def replace(match: re.Match) -> str:
        if match.group(1) is None:
            raise ConfigError(
                path,
                f"{raw!r}: '${{env:' must be followed by a variable name and '}}' "
                "(letters, digits and '_', not starting with a digit)",
            )
        return _value(match.group(1), environ, path)

    return _REFERENCE.sub(replace, raw)


def _scalar(value: str) -> Any:
    """``value`` as YAML reads a plain scalar (``3`` an int, ``true`` a bool, ``1e3`` a float, else the text)."""
    if value == "":
        return ""
    loader = yaml.SafeLoader("")
    return loader.construct_object(yaml.ScalarNode(loader.resolve(yaml.ScalarNode, value, (True, False)), value))

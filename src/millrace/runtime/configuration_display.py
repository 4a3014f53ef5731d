"""How a configuration is shown to REST clients: every value a string, secrets masked.

A key is sensitive when one of its parts (split at ``.``, ``-`` and ``_``) names password,
secret, token, credential or key material (``key``, ``apikey``, ``jaas``, ``auth-params``;
Flink's ``GlobalConfiguration.isSensitive`` keeps a like list); its value shows as
:data:`HIDDEN`.

Threading:
    Pure functions: any thread.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

from millrace.config import Configuration, all_options
from millrace.errors import ConfigError

__all__ = ["HIDDEN", "displayed_configuration", "displayed_value", "is_sensitive"]

HIDDEN = "******"
_SENSITIVE_PARTS = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "token",
        "credential",
        "credentials",
        "key",
        "apikey",
        "jaas",
        "keystore",
        "truststore",
    }
)
_SENSITIVE_WORDS = ("password", "secret", "token", "auth-params", "private")


def is_sensitive(key: str) -> bool:
    """Whether the value of ``key`` must not be shown (see the module docstring)."""
    lowered = key.lower()
    if any(word in lowered for word in _SENSITIVE_WORDS):
        return True
    return any(part in _SENSITIVE_PARTS for part in re.split(r"[.\-_]", lowered))


def displayed_value(key: str, value: object) -> str:
    """``value`` as text (an Enum by its value), or :data:`HIDDEN` for a sensitive key."""
    if is_sensitive(key):
        return HIDDEN
    if isinstance(value, enum.Enum):
        value = value.value
    return str(value)


def displayed_configuration(configuration: Configuration) -> list[tuple[str, str]]:
    """The effective configuration, sorted by key: every known option (its set or default
    value; a derived default computed) and every other key set, secrets masked.

    Returns:
        ``(key, value)`` pairs; values as strings.
    """
    shown: dict[str, str] = {}
    for option in all_options():
        try:
            value: object = configuration.get(option)
        except ConfigError:  # an invalid value is shown as it was given
            value = configuration.get_raw(option.key, "")
        shown[option.key] = displayed_value(option.key, value)
    raw: Mapping[str, object] = configuration.to_dict()
    for key, value in raw.items():
        if key not in shown:
            shown[key] = displayed_value(key, value)
    return sorted(shown.items())

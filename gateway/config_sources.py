"""Where a setting's value comes from: ``VG_*`` environment variables and ``--flags``.

The settings are the fields of one dataclass (:class:`gateway.config.GatewayConfig`); this module
reads them by field, so it knows no setting by name. A flag is the field name with ``-`` for ``_``
(``--pool-size``), a variable the field name upper-cased behind ``VG_`` (``VG_POOL_SIZE``). A field
typed ``int``, ``float`` or ``bool`` is parsed as such (a bool takes 1/true/yes/on or 0/false/no/off);
any other field is taken as text. A ``VG_*`` variable that is no field's (nor one of
:data:`OTHER_VARIABLES`) is named by :func:`unknown_variables`, so a typo is not silently ignored.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import Any

ENV_PREFIX = "VG_"

# ``VG_*`` variables the project reads that are no setting: not warned about at start-up.
OTHER_VARIABLES = {
    "VG_TURN_PASSWORD": "docker-compose.yml: the TURN relay's password (coturn's user voice, VG_ICE_SERVERS)",
    "VG_WHEEL_CACHE": "scripts/setup.sh: where the llama-cpp-python wheel is cached",
}


def values_from_env(settings: type, environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields of the dataclass ``settings`` that ``environ`` sets, parsed.

    Raises ValueError naming the variable when a value does not parse.
    """
    values: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        key = env_name(f.name)
        if key in environ:
            values[f.name] = _parse(f, environ[key], key)
    return values


def unknown_variables(settings: type, environ: Mapping[str, str]) -> list[str]:
    """One message per ``VG_*`` name in ``environ`` that no field of the dataclass ``settings`` reads
    and that is not one of :data:`OTHER_VARIABLES`, sorted by name, naming the closest setting's
    variable when one is near (``difflib``): ``VG_POOLSIZE=4`` → "VG_POOLSIZE is no setting and is
    ignored; did you mean VG_POOL_SIZE?"."""
    fields = [f.name for f in dataclasses.fields(settings)]
    known = {env_name(name) for name in fields} | OTHER_VARIABLES.keys()
    messages = []
    for key in sorted(k for k in environ if k.startswith(ENV_PREFIX) and k not in known):
        message = f"{key} is no setting and is ignored"
        closest = difflib.get_close_matches(key[len(ENV_PREFIX) :].lower(), fields, n=1)
        if closest:
            message += f"; did you mean {env_name(closest[0])}?"
        messages.append(message + " (voice-gateway serve --help lists the settings and their variables)")
    return messages


# A text setting named like a secret (``api_key``, ``llm_api_key``, ``ice_credential``,
# ``sip_webhook_secret``...) is shown as set, never by its value.
_SECRET_NAME = re.compile(r"(^|_)(key|secret|credential|password|token)$")
_SHOWN_CHARS = 60


def changed_settings(config: Any) -> list[str]:
    """The fields of the dataclass instance ``config`` that differ from their defaults, in field
    order, as ``name=value`` (:func:`shown_value`; a text over 60 characters cut with ``...``; a text
    setting named like a secret, or holding one such as ``ice_servers``' TURN ``credential``, as
    ``name=[set]``): what ``voice-gateway serve`` logs at start."""
    changed = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if shown_default(f) == shown_value(value):
            continue
        if isinstance(value, str) and (_SECRET_NAME.search(f.name) or "credential" in value.lower()):
            changed.append(f"{f.name}=[set]")
            continue
        shown = shown_value(value)
        changed.append(f"{f.name}={shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + '...'}")
    return changed


def add_flags(settings: type, parser: argparse.ArgumentParser) -> None:
    """Add one ``--flag`` per field of ``settings``; defaults stay None so the environment can fill
    them. Each flag's help ends with the field's default and its variable: ``[default 8080; env VG_PORT]``."""
    for f in dataclasses.fields(settings):
        flag = "--" + f.name.replace("_", "-")
        shown = shown_default(f).replace("%", "%%")  # argparse %-formats help texts
        help_text = f"{f.metadata.get('help', '')} [default {shown}; env {env_name(f.name)}]"
        parser.add_argument(flag, dest=f.name, default=None, type=_flag_type(f), help=help_text)


def shown_default(f: dataclasses.Field) -> str:
    """A field's default as ``--help`` shows it: a bool as on/off, an empty text or one with spaces
    quoted (``''``, ``'You are...'``), a number or other text as written on the command line."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "none"
    return shown_value(value)


def shown_value(value: Any) -> str:
    """A default as every ``--help`` shows it (:func:`shown_default`, :class:`DefaultsHelpFormatter`)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "" or (isinstance(value, str) and " " in value):
        return repr(value)
    return str(value)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Ends the help of each flag that has a default with it, as the settings' flags end theirs
    (:func:`add_flags`): `` [default 3]``, written by :func:`shown_value`. A flag whose default is
    None (none, or one read later, e.g. from the environment) or whose help says its default
    already (``[default``) is left as written. For parsers whose flags are not settings
    (``voice-gateway loadtest``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.default in (None, argparse.SUPPRESS) or "[default" in text:
            return text
        return f"{text} [default {shown_value(action.default).replace('%', '%%')}]"


def values_from_flags(settings: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``settings`` given on the command line (flags left out are not in it)."""
    return {
        f.name: getattr(args, f.name) for f in dataclasses.fields(settings) if getattr(args, f.name, None) is not None
    }


def env_name(field_name: str) -> str:
    """The environment variable of a setting: ``pool_size`` → ``VG_POOL_SIZE``."""
    return ENV_PREFIX + field_name.upper()


def _type_of(f: dataclasses.Field) -> Any:
    return {"int": int, "float": float, "str": str, "bool": _parse_bool}.get(str(f.type), str)


def _flag_type(f: dataclasses.Field) -> Any:
    """The argparse ``type`` of a field's flag: a bool flag's refusal says which values it takes
    (argparse would name the parser function: "invalid _parse_bool value")."""
    if str(f.type) != "bool":
        return _type_of(f)

    def boolean(text: str) -> bool:
        try:
            return _parse_bool(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return boolean


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {text!r} (use 1, true, yes, on or 0, false, no, off)")


def _parse(f: dataclasses.Field, raw: str, key: str) -> Any:
    try:
        return _type_of(f)(raw)
    except ValueError as exc:
        raise ValueError(f"{key}={raw!r}: {exc}") from None

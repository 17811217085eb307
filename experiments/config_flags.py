"""absl flags generated from config dataclasses, and configs built back from the flags.

A field declared with :func:`acvi_tf.utils.settings.setting` is a flag: its type picks
the kind (bool, integer, float, string; an enum where it has choices; a repeated
``key=value`` string for a ``dict``), its metadata gives the help, choices, bounds and
the flag's name. :func:`define_config_flags` defines them, :func:`config_from_flags`
builds the dataclass from the parsed values, and :func:`apply_profile` makes a
profile's values (``{flag: value}``, overrides of the dataclass defaults) the defaults
of the flags not given explicitly. Nothing here knows a particular setting.
"""

import ast
import dataclasses
import sys
import typing

from absl import app, flags

from acvi_tf.utils import settings


class FlagError(app.UsageError):
    """A bad flag value; the message starts with the flag's name."""

    def __init__(self, name, message):
        super().__init__(f"--{name}: {message}")
        self.flag = name


def _kind(cls, field):
    """The flag kind of a field: its annotation, ``Optional[...]`` unwrapped."""
    kind = typing.get_type_hints(cls)[field.name]
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if len(args) == 1 and type(None) in typing.get_args(kind) else kind


def define_config_flags(cls, flag_values, module_name=None):
    """Defines one flag per setting of the dataclass ``cls`` in ``flag_values``, listed in
    ``--help`` under ``module_name`` (default: the calling module, named as absl names it:
    a CLI run as ``python -m`` by its path, so ``--helpshort`` still finds its flags)."""
    if module_name is None:
        module_name = sys._getframe(1).f_globals.get("__name__")
        if module_name == "__main__":
            module_name = sys.argv[0]
    for field in settings.settings(cls):
        name, help_text = settings.flag_name(field), field.metadata["help"]
        default, choices, kind = settings.flag_default(field), settings.choices(field), \
            _kind(cls, field)
        kw = {"flag_values": flag_values, "module_name": module_name}
        bounds = {k: field.metadata[k] for k in ("lower_bound", "upper_bound")
                  if field.metadata.get(k) is not None}
        if kind is dict:
            flags.DEFINE_multi_string(name, [], help_text, **kw)
        elif choices is not None:
            flags.DEFINE_enum(name, default, choices, help_text, **kw)
        elif kind is bool:
            flags.DEFINE_bool(name, default, help_text, **kw)
        elif kind is int:
            flags.DEFINE_integer(name, default, help_text, **bounds, **kw)
        elif kind is float:
            flags.DEFINE_float(name, default, help_text, **bounds, **kw)
        else:
            flags.DEFINE_string(name, default, help_text, **kw)


def flag_names(cls, exclude=()):
    """The flags of the settings of ``cls`` (but those of the fields in ``exclude``)."""
    return tuple(settings.flag_name(f) for f in settings.settings(cls) if f.name not in exclude)


def config_from_flags(cls, flag_values, **overrides):
    """The dataclass ``cls`` from the parsed flags (and ``overrides``): a setting from its
    flag (a flag left at ``None`` gives the field its default; a ``dict`` from its
    ``key=value`` values), any other field from the flag of its name, if there is one."""
    values = {}
    for field in dataclasses.fields(cls):
        is_setting = bool(field.metadata.get("help"))
        name = settings.flag_name(field) if is_setting else field.name
        if field.name in overrides or not field.init or name not in flag_values:
            continue
        value = flag_values[name].value
        if is_setting and value is None and "flag_default" in field.metadata:
            continue
        if is_setting and _kind(cls, field) is dict:
            value = parse_options(value, name)
        values[field.name] = value
    return cls(**values, **overrides)


def explicit(name, flag_values):
    """True when ``--name`` was given on the command line or in a flagfile."""
    return bool(flag_values[name].present)


def apply_profile(profile, flag_values, name=""):
    """Sets the values of the profile ``name`` (``{flag: value}``) as the defaults of the
    flags not set explicitly; returns those applied. Values are parsed by the flag (so a
    bad profile entry fails like a bad command-line value)."""
    applied = {}
    for flag, value in profile.items():
        if flag not in flag_values:
            raise KeyError(f"profile {name!r} sets unknown flag --{flag}")
        if not explicit(flag, flag_values):
            flag_values.set_default(flag, value)
            applied[flag] = value
    return applied


def parse_options(values, flag, allowed=None, owner=""):
    """``["k=v", ...]`` -> dict of Python literals (bare words stay strings).

    With ``allowed``, every key must be one of them (the named parameters of the
    class the options go to). Errors are :class:`FlagError` naming ``--flag``.
    """
    out = {}
    for item in values or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not key.isidentifier():
            raise FlagError(flag, f"{item!r} is not key=value (e.g. kl_weight=0.5)")
        raw = raw.strip()
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        if key in out:
            raise FlagError(flag, f"{key!r} is given twice")
        out[key] = value
    if allowed is not None and out:
        unknown = sorted(set(out) - set(allowed))
        if unknown:
            raise FlagError(flag, f"{', '.join(unknown)} not an option of {owner}; its "
                            f"options are: {', '.join(allowed) or '(none)'}")
    return out

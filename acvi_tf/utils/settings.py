"""One declaration per setting: a config dataclass field that carries its flag.

:func:`setting` is a :func:`dataclasses.field` whose metadata holds what a command line
needs of the setting besides its type and default: the help text, the choices, the
bounds, and the flag's name where it differs from the field's. The CLIs generate their
flags from these fields, save a run's settings and restore a trained run's from them
(:mod:`experiments.config_flags`); the package never reads a flag. A field declared
without help is no flag (the vocabulary sizes a task fills in).
"""

import dataclasses

# What a trained run's model_dir does with a setting when the run is started again
# (evaluated, decoded, exported, resumed). RESTORED: the setting describes the trained
# model or its data, so the saved value is taken (an explicit different one is an
# error). ADOPTED: the saved value is the default; an explicit one wins. DECODING: as
# ADOPTED, in the modes that read a trained model (eval, decode, export) only. SAVED:
# recorded with the run, never taken back.
RESTORED, ADOPTED, DECODING, SAVED = "restored", "adopted", "decoding", "saved"

_NOTHING = object()


def setting(default=dataclasses.MISSING, help=None, *, flag=None, choices=None,
            lower_bound=None, upper_bound=None, flag_default=_NOTHING,
            default_factory=dataclasses.MISSING, restore=None):
    """A dataclass field that is also a command-line flag.

    ``choices``: the allowed values, or a function returning them (a registry's names,
    read when the flags are defined, after every entry has registered). ``flag``: the
    flag's name (default: the field's). ``flag_default``: the flag's default where it is
    not the field's (``None`` for an optional path; a flag left at ``None`` gives the
    field its default). A ``dict`` field is a repeated ``key=value`` flag. ``restore``:
    what a trained run does with it (:data:`RESTORED`, ...), where not what the CLI
    holds for the whole config class.
    """
    metadata = {"help": help, "flag": flag, "choices": choices, "restore": restore,
                "lower_bound": lower_bound, "upper_bound": upper_bound}
    if flag_default is not _NOTHING:
        metadata["flag_default"] = flag_default
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata=metadata)


def settings(cls):
    """The fields of the config dataclass ``cls`` that are flags (declared with help)."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("help")]


def flag_name(field):
    """The flag of a :func:`setting` field."""
    return field.metadata.get("flag") or field.name


def kept_flags(configs, *kept):
    """The flags of the settings of ``configs`` (``(class, what a trained run does with
    its settings)`` pairs) that a trained run treats as one of ``kept``; a field's own
    ``restore`` wins over its class's, and a class's ``RUN_FIELDS`` (how this machine
    runs the model, not what the model is) are :data:`SAVED`."""
    names = []
    for cls, policy in configs:
        run_fields = getattr(cls, "RUN_FIELDS", ())
        for f in settings(cls):
            own = f.metadata.get("restore") or (SAVED if f.name in run_fields else policy)
            if own in kept:
                names.append(flag_name(f))
    return tuple(names)


def flag_default(field):
    """The default of a :func:`setting` field's flag."""
    if "flag_default" in field.metadata:
        return field.metadata["flag_default"]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def choices(field):
    """The allowed values of a :func:`setting` field, or None (any value of its type)."""
    values = field.metadata.get("choices")
    return list(values() if callable(values) else values) if values is not None else None

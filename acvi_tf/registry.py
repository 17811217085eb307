"""A tiny name -> class registry, as fairseq's ``@register_model``.

The CLI's ``--attention=`` choices are read from the registry, so a variant is
listed in exactly one place: the decorator on its class.
"""


class Registry:
    """Maps names to classes; ``register(name)`` is a class decorator."""

    _by_kind = {}  # kind -> the registry: what a config field names its choices by

    def __init__(self, kind, load=None):
        self.kind = kind
        self._entries = {}
        self._load = load  # registers the entries on first use (an import kept lazy)
        Registry._by_kind[kind] = self

    def register(self, name):
        def decorator(cls):
            if name in self._entries and self._entries[name] is not cls:
                raise ValueError(
                    f"{self.kind} {name!r} is registered twice: "
                    f"{self._entries[name].__module__} and {cls.__module__}")
            self._entries[name] = cls
            cls.registered_name = name
            return cls
        return decorator

    def get(self, name):
        if self._load:
            self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of: "
                             f"{', '.join(self.names())}") from None

    def names(self):
        if self._load:
            self._load()
        return sorted(self._entries)

    def __contains__(self, name):
        return name in self._entries


def registered_names(kind):
    """A function giving the names in the registry of ``kind`` (a config field's choices,
    read once the registry exists, so the module declaring the field need not import
    the registry's package)."""
    return lambda: Registry._by_kind[kind].names()


# Constructor parameters the model fills in from its own config, never options a user
# gives (--attention_option / --latent_option).
INTERNAL_PARAMETERS = ("self", "memory_dim", "target_vocab_size", "pad_id", "unk_id")


def constructor_options(cls):
    """``{name: default}`` of the options of a registered class: its named constructor
    parameters but the internal ones (``inspect.Parameter.empty`` where there is no
    default). The one list the CLIs check options against and the HParams record."""
    import inspect
    params = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in params if p.name not in INTERNAL_PARAMETERS
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

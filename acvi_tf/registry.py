"""A tiny name -> class registry, as fairseq's ``@register_model``.

The CLI's ``--attention=`` choices are read from the registry, so a variant is
listed in exactly one place: the decorator on its class.
"""


class Registry:
    """Maps names to classes; ``register(name)`` is a class decorator."""

    def __init__(self, kind):
        self.kind = kind
        self._entries = {}

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
        try:
            return self._entries[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of: "
                             f"{', '.join(self.names())}") from None

    def names(self):
        return sorted(self._entries)

    def __contains__(self, name):
        return name in self._entries

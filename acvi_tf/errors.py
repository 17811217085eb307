"""The two errors a run reports to its user as one line (the CLIs turn them into a flag
error or an ``error:`` line): :class:`ConfigError` names the setting at fault,
:class:`RunError` says why a run cannot go on."""


class ConfigError(ValueError):
    """A bad setting; ``field`` names it (the CLI flag of the same name)."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


class RunError(RuntimeError):
    """A run cannot go on (e.g. no usable data was read); the message says why."""

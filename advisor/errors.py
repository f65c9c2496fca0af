"""Errors that end a command with one clear line instead of a traceback."""


class CgAdviseError(Exception):
    """Bad input or environment; ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class TraceError(CgAdviseError):
    """The report cannot be read or holds nothing to analyse."""

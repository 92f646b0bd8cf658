"""The one error a process reports at start as a single line, never a traceback."""


class ConfigError(Exception):
    """Bad configuration: the message names the variable, or the file and line, and the fix."""

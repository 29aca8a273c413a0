"""Launchers: a :class:`~harness.engines.spec.LaunchSpec` -> a running server (Docker container or local process).

Pick one with :func:`harness.launch.registry.launcher_for`. Every launcher guarantees stop-and-remove on success,
failure, Ctrl-C and SIGTERM, copies (redacted) logs into the run directory and records the exact command.
"""

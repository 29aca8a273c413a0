"""The harness's version, recorded in every manifest and report (kept in step with ``pyproject.toml``)."""

__version__ = "0.1.0"

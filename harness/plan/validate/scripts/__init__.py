"""Scripts sent as text to an engine's own interpreter (``python3 -c``) by :mod:`harness.plan.validate`.

They import only the standard library and the engine: they never import the harness.
"""

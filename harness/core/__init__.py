"""Pure helpers every stage may use, with no harness imports: terminal-safe text, bounded input files, safe YAML, JSON
depth, JSON Lines, the exit codes, the CLI's error boundary and network caps (``net``).
"""

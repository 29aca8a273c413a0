"""What will run and whether it can decide (``harness plan``): the plan itself and its view, pre-flight checks, the
engine's own validation, power before the run, the capacity search's design and each step's load layout.
"""

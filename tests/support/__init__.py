"""Helpers shared by the tests and the benchmarks in ``tools/``, outside the installed package: sample summaries
(:mod:`.sample`, :mod:`.sample_stats`, :mod:`.sample_effects`) and the simulator as a process (:mod:`.sim`).
They import only ``harness``; ``harness`` never imports them."""

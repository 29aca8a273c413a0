"""The rollback rules, one per module, as pure functions over measured values (budget, regression evidence lives in
:mod:`harness.decision.evidence`, earns-its-keep, errors, causal, fit screen, tier health, host contention: the
baseline's DRAM and disk in ``host_contention``, the load side's steps that never decide in ``load_host``).
"""

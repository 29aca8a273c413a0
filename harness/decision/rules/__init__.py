"""The rollback rules, one per module, as pure functions over measured values (budget, regression evidence lives in
:mod:`harness.decision.evidence`, earns-its-keep, errors, causal, fit screen, tier health).
"""

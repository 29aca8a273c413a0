"""``harness predict``: a scenario for real hardware, run on the simulated engine with a named hardware profile, ending
in a PREDICTED verdict.

The wing maps the user's scenario onto the simulator (:mod:`.mapping`: engine fields in :mod:`.engine_map`, the
model check in :mod:`.model_match`), refuses what the simulator cannot model with the field named
(:class:`.refusal.PredictRefused`), runs the mapped scenario through the same conductor as ``harness run``
(:mod:`.run`) and marks every report PREDICTED with the profile, its sources and the simulator's fidelity table
(:mod:`.record`). docs/predict.md is the user's guide.
"""

"""The prediction's record: built from the profile, the simulator's fidelity table and the mapping. The run directory
keeps it as ``prediction.json`` and every summary built from that directory carries it as its ``prediction`` part
(:mod:`harness.rundir.prediction`: a resumed or re-reported prediction stays PREDICTED)."""

from __future__ import annotations

from harness.config.arms import TrtllmKvCache
from harness.config.scenario import Scenario
from harness.predict.mapping import Mapped, PredictTarget
from harness.schema.prediction import FidelityItem, Prediction, PredictionProfile, SourceNote
from harness.sim.fidelity import load_fidelity


def gpu_kv_blocks(scenario: Scenario, target: PredictTarget) -> tuple[int, int] | None:
    """The baseline's GPU KV cache on the profile, in blocks, and the block size (the simulator's rule)."""
    profile = target.profile
    engine = scenario.engine_for(scenario.baseline)
    off = scenario.baseline.offload
    block = off.tokens_per_block if isinstance(off, TrtllmKvCache) else profile.scheduler.block_size
    kv = profile.kv_cache_bytes(engine.gpu_memory_utilization)
    per_block = profile.model.kv_bytes_per_token * block
    return (kv // per_block, block) if kv > per_block else None


def build_prediction(source: Scenario, mapped: Mapped, target: PredictTarget) -> Prediction:
    """The summary's ``prediction`` part for this mapping."""
    p = target.profile
    blocks = gpu_kv_blocks(mapped.scenario, target)
    profile = PredictionProfile(
        name=target.profile_name, description=p.description, model=p.model.name, gpu=p.gpu.name,
        gpu_kv_blocks=blocks[0] if blocks else None, block_size=blocks[1] if blocks else None,
        sources=[SourceNote(part=s.part, text=s.text) for s in p.sources])
    fidelity = [FidelityItem(**row.model_dump(), status_text=row.status_text) for row in load_fidelity()]
    return Prediction(profile=profile, fidelity=fidelity, clock=target.clock, scenario_file=source.source_file,
                      scenario=source.name, engine=source.engine.kind, model=source.engine.model,
                      mapping=list(mapped.changes), warnings=list(mapped.warnings))

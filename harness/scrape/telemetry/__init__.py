"""Host telemetry during each step: memory, page cache, ``/dev/shm``, disk-tier devices and (where NVML exists) GPUs.

Modules: ``model`` (the per-step ``host`` figures in ``summary.json``), ``probes`` (one reading from ``/proc``,
``statvfs`` and NVML; each says plainly why a figure is not available), ``sampler`` (a background thread writing raw
readings to ``metrics/<arm>/host.jsonl``), ``summarize`` (raw readings -> per-step figures), ``fit`` (the fit
screen's "host DRAM or storage already contended" evidence from the baseline).
"""

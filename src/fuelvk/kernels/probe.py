"""Device probes (internal, no public op): kernels the runtime runs to measure what a device does
rather than infer it from its name. loop_probe (shaders/loop_probe.comp) finds a per-invocation loop
iteration cap (runtime/loopcap.py, Device.loop_budget)."""
from .registry import family

GROUP = "Device probes (internal)"

family("loop_probe", "loop_probe.comp", {"u32": "loop_probe"}, GROUP,
       tag_defines={}, tag_features={})

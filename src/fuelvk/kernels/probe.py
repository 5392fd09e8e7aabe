"""Device probes (internal, no public op): kernels the runtime runs to measure what a device does
rather than infer it from its name. loop_probe (shaders/loop_probe.comp) finds a per-invocation loop
iteration cap (runtime/loopcap.py, Device.loop_budget); half_probe (shaders/half_probe.comp) checks and
times the device's own f16 conversions against integer ones (runtime/halfconv.py, Device.half_native)."""
from .registry import family

GROUP = "Device probes (internal)"

family("loop_probe", "loop_probe.comp", {"u32": "loop_probe"}, GROUP,
       tag_defines={}, tag_features={})
family("half_probe", "half_probe.comp", {"u32": "half_probe"}, GROUP,
       tag_defines={}, tag_features={})

#version 450
// Loop-cap probe (runtime/loopcap.py, behind Device.loop_budget). Mesa 22.x lavapipe silently leaves
// loops once an invocation has run 65,535 iterations (its LP_MAX_TGSI_LOOP_ITERATIONS); conforming
// drivers run every iteration. One invocation runs a first loop of up to p.first iterations, then a
// second of up to p.n, and stores how many each ran: counts[0], counts[1]. With first = 0 a short
// second count is the cap; with first > 0 it says whether the cap counts each loop alone or their sum.
// counts[2] holds 1 (written by the host) so that no compiler can fold a loop into a closed form.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Counts { uint counts[]; };
layout(push_constant) uniform Params { uint first; uint n; } p;

void main() {
    uint step = counts[2];
    uint a = 0u, b = 0u;
    for (uint i = 0u; i < p.first; ++i) a += step;
    for (uint i = 0u; i < p.n; ++i) b += step;
    counts[0] = a;
    counts[1] = b;
}

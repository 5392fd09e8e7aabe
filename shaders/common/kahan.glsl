// Compensated (Kahan) accumulation in the accumulator type A: s += v, c carries the lost low-order
// part. Once the running sum is +-inf (an infinite input, or overflow) the compensation is dropped:
// (t - s) - y would be inf - inf = NaN and turn an infinite sum into NaN (numpy gives +-inf), and a
// NaN c would then poison every later sum. For finite sums the result is unchanged, bit for bit;
// a NaN input still gives NaN (through t).
#ifndef FUELVK_KAHAN_GLSL
#define FUELVK_KAHAN_GLSL
void kahan_add(inout A s, inout A c, A v) {
    precise A y = v - c;
    precise A t = s + y;
    precise A d = t - s;
    precise A e = d - y;
    c = isinf(t) ? A(0) : e;
    s = t;
}
#endif

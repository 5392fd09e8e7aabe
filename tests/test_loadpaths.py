"""Texel-buffer bindings (uniform texel buffers via texelFetch, storage texel buffers via imageLoad)
next to storage buffers: the load-path copy kernels must move every word bit for bit."""
import dataclasses
import json

import numpy as np
import pytest

import fuelvk as fv
from fuelvk import runtime
from fuelvk.bench.loadpaths import copy_through, read_through
from fuelvk.kernels import kernel
from fuelvk.kernels.loadpaths import LOADPATH_RPT, LOADPATH_WG, LOADPATHS
from fuelvk.runtime.pipelines import spv_dir

SENTINEL = 0xDEADBEEF


def _copy_case(tag, n, off):
    """Copy n texels from texel offset `off`; check them and that nothing past them was written."""
    w = LOADPATHS[tag][1]
    rng = np.random.default_rng(n + off)
    src_words = rng.integers(0, 2**32, (off + n) * w + 3 * w, dtype=np.uint32)
    if tag == "ssbo_f32":   # float loads: random finite floats (NaN payloads are not promised)
        src_words = rng.standard_normal(src_words.size, dtype=np.float32).view(np.uint32)
    if tag == "utb_rgba16f":   # halves read as floats and repacked: infinities, zeros, subnormals too
        halves = rng.standard_normal(2 * src_words.size).astype(np.float16).view(np.uint16)
        halves[2 * off * w:][:8] = [0x0001, 0x03FF, 0x8001, 0x7C00, 0xFC00, 0x8000, 0x0000, 0x7BFF]
        src_words = halves.view(np.uint32)
    src = fv.asarray(src_words)
    dst = fv.asarray(np.full(n * w + 2 * w + 5, SENTINEL, np.uint32))
    copy_through(tag, dst.buffer, src.buffer, n, off)
    got = dst.numpy()
    np.testing.assert_array_equal(got[:n * w], src_words[off * w:(off + n) * w])
    assert (got[n * w:] == SENTINEL).all()


@pytest.mark.parametrize("tag", sorted(LOADPATHS))
@pytest.mark.parametrize("n,off", [(1, 0), (777, 5), (1024, 1)])
def test_copy_is_bit_exact(tag, n, off):
    _copy_case(tag, n, off)


@pytest.mark.parametrize("tag", ["utb_r32", "utb_rgba32", "stb_rgba32", "ssbo_u4"])
def test_copy_larger(tag):
    """Several workgroups' worth, through a chunk shared with other slots (non-zero slot offset)."""
    keep = [fv.empty((1000,), np.float32) for _ in range(3)]   # take slots so the next ones start later
    _copy_case(tag, 40_000 // LOADPATHS[tag][1], 37)
    del keep


@pytest.mark.parametrize("tag", sorted(LOADPATHS))
def test_read_mode(tag):
    """READ mode: invocation q = g*WG + lane combines texels g*WG*RPT + lane + j*WG (xor; f32: +)."""
    w, n, off = LOADPATHS[tag][1], 5000, 3
    rng = np.random.default_rng(7)
    if tag == "ssbo_f32":   # small integers: the float sum is exact in any order
        src_words = rng.integers(-50, 50, off + n).astype(np.float32).view(np.uint32)
    elif tag == "utb_rgba16f":
        src_words = rng.standard_normal(2 * (off + n) * w).astype(np.float16).view(np.uint32)
    else:
        src_words = rng.integers(0, 2**32, (off + n) * w, dtype=np.uint32)
    src = fv.asarray(src_words)
    dst = fv.empty((n * w,), np.uint32)
    outs = read_through(tag, dst.buffer, src.buffer, n, off)
    groups = -(-n // (LOADPATH_WG * LOADPATH_RPT))
    assert outs == groups * LOADPATH_WG
    seg = np.zeros((groups * LOADPATH_WG * LOADPATH_RPT, w), np.uint32)   # zero pads: identity of xor and +
    seg[:n] = src_words[off * w:].reshape(n, w)
    seg = seg.reshape(groups, LOADPATH_RPT, LOADPATH_WG, w)
    if tag == "ssbo_f32":
        want = seg.view(np.float32).sum(axis=1, dtype=np.float64).astype(np.float32).view(np.uint32)
    else:
        want = np.bitwise_xor.reduce(seg, axis=1)
    np.testing.assert_array_equal(dst.numpy()[:outs * w], want.reshape(-1))


def test_manifest_records_descriptor_types():
    """SPIR-V reflection: texel-buffer bindings carry their type (and storage ones their format)."""
    m = json.loads((spv_dir() / "manifest.json").read_text())["variants"]
    src = {tag: next(b for b in m[f"loadpath.{tag}"]["bindings"] if b["binding"] == 1) for tag in LOADPATHS}
    for tag in LOADPATHS:   # each path reads through the descriptor its name says
        want = {"ssbo": None, "utb": "uniform_texel_buffer", "stb": "storage_texel_buffer"}[tag.split("_")[0]]
        assert src[tag].get("type") == want, tag
    assert src["stb_r32"] == {**src["stb_r32"], "type": "storage_texel_buffer", "format": "R32_UINT"}
    assert src["stb_rgba32"]["format"] == "R32G32B32A32_UINT"
    assert "type" not in src["ssbo_u4"] and "type" not in m["loadpath.utb_r32"]["bindings"][0]


def test_views_are_cached_per_slot_and_format():
    ctx = runtime.get()
    src, dst = fv.asarray(np.arange(64, dtype=np.uint32)), fv.empty((64,), np.uint32)

    def formats():    # views of src's slot (an earlier test's buffer in the same slot may have left some)
        return [k[0] for k in src.buffer.chunk.views if k[1:] == (src.buffer.offset, src.buffer.size)]

    before = set(formats())
    for _ in range(3):
        copy_through("utb_r32", dst.buffer, src.buffer, 64)
    copy_through("utb_rgba32", dst.buffer, src.buffer, 16)
    fv.synchronize()
    assert sorted(formats()) == sorted(before | {"R32G32B32A32_UINT", "R32_UINT"})
    np.testing.assert_array_equal(dst.numpy(), np.arange(64, dtype=np.uint32))
    del src, dst
    ctx.pool.trim()   # destroys idle chunks and their views (validation checks nothing in use is destroyed)


def test_texel_limit_raises(device_limits):
    """A slot with more texels than maxTexelBufferElements is refused, naming kernel and limit."""
    src, dst = fv.empty((30_000,), np.uint32), fv.empty((30_000,), np.uint32)   # a size class of its own
    device_limits(maxTexelBufferElements=100)
    with pytest.raises(fv.UnsupportedError, match=r"loadpath\.stb_r32 binding 1.*maxTexelBufferElements = 100"):
        copy_through("stb_r32", dst.buffer, src.buffer, 10)


def test_texel_binding_without_format_is_a_build_error():
    ctx = runtime.get()
    v = dataclasses.replace(kernel("loadpath", "utb_r32"), texel_formats=())
    with pytest.raises(fv.BuildError, match="binding 1 has no format"):
        ctx.pipelines._binding_kinds(v, ctx.pipelines.meta(v.id))

"""torch.distributed for fuelvk tensors: the c10d collectives (all_reduce, broadcast, all_gather) run on
the process group's CPU backend (gloo) through host memory.

c10d's ops dispatch on their tensors' device; for a fuelvk tensor they land here (PrivateUse1): the
tensors are downloaded, the collective runs on the CPU copies (gloo) and is waited for, and the results
are written back into the device tensors, so the returned Work is already complete. No communication
of fuelvk's own: gloo does all of it. Registered by register() when torch.distributed is available.
"""
import torch

from . import device as fuelvk_device

_LIBS = []


def _host(tensors):
    return [fuelvk_device.download(t) if fuelvk_device.is_fuelvk(t) else t for t in tensors]


def _back(tensors, host):
    for t, h in zip(tensors, host):
        if t is not h:
            fuelvk_device.copy_from(h, t)


def allreduce_(tensors, process_group, reduce_op, sparse_indices=None, async_op=True, timeout=-1):
    host = _host(tensors)
    _, work = torch.ops.c10d.allreduce_.default(host, process_group, reduce_op, sparse_indices, async_op, timeout)
    work.wait()
    _back(tensors, host)
    return tensors, work


def broadcast_(tensors, process_group, root_rank, root_tensor, async_op=True, timeout=-1):
    host = _host(tensors)
    _, work = torch.ops.c10d.broadcast_.default(host, process_group, root_rank, root_tensor, async_op, timeout)
    work.wait()
    _back(tensors, host)
    return tensors, work


def allgather_(output_tensors, input_tensors, process_group, async_op=True, timeout=-1):
    outs = [_host(group) for group in output_tensors]
    _, work = torch.ops.c10d.allgather_.default(outs, _host(input_tensors), process_group, async_op, timeout)
    work.wait()
    for group, host in zip(output_tensors, outs):
        _back(group, host)
    return output_tensors, work


def register():
    if _LIBS or not torch.distributed.is_available():
        return
    lib = torch.library.Library("c10d", "IMPL")
    for fn in (allreduce_, broadcast_, allgather_):
        lib.impl(fn.__name__, fn, "PrivateUse1")
    _LIBS.append(lib)

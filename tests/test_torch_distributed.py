"""torch.distributed (gloo) with fuelvk-device tensors: collectives and a 2-process DistributedDataParallel
run on localhost, checked against one process training on the whole batch."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)

STEPS, BATCH = 3, 8


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _data():
    x = torch.randn(BATCH, 4, generator=torch.Generator().manual_seed(1))
    return x, x.sum(1, keepdim=True)


def _train(model, x, y, step_model=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss((step_model or model)(x), y).backward()
        opt.step()


def worker(rank, store, out):
    """One rank: collectives on device tensors, then DDP training on its half of the batch."""
    import torch.distributed as dist

    import fuelvk.torch as ft
    os.environ["FUELVK_TORCH_FALLBACK"] = "0"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    t = torch.tensor([1.0 + rank, 2.0]).to("fuelvk")
    dist.all_reduce(t)
    assert t.device.type == "fuelvk" and t.cpu().tolist() == [3.0, 4.0]
    b = torch.tensor([5.0 + rank]).to("fuelvk")
    dist.broadcast(b, 1)
    assert b.cpu().tolist() == [6.0]
    outs = [torch.zeros(2).to("fuelvk") for _ in range(2)]
    dist.all_gather(outs, t * (rank + 1))
    assert [o.cpu().tolist() for o in outs] == [[3.0, 4.0], [6.0, 8.0]]
    model = _model().to("fuelvk")
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    x, y = _data()
    half = slice(rank * BATCH // 2, (rank + 1) * BATCH // 2)
    _train(model, x[half].to("fuelvk"), y[half].to("fuelvk"), step_model=ddp)
    assert ft.fallback_stats() == {}
    if rank == 0:
        torch.save([p.detach().cpu() for p in model.parameters()], out)
    dist.destroy_process_group()


def test_ddp_two_processes_match_one(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    store, out = tmp_path / "store", tmp_path / "params.pt"
    procs = [subprocess.Popen([sys.executable, __file__, str(r), str(store), str(out)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(2)]
    logs = [p.communicate(timeout=600)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)
    model = _model()
    _train(model, *_data())   # one process, the whole batch: DDP's averaged gradients are this one's
    for got, want in zip(torch.load(out), model.parameters()):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    worker(int(sys.argv[1]), sys.argv[2], sys.argv[3])

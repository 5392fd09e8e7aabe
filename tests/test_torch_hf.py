"""Whole models on the "fuelvk" PyTorch device against the same models on torch CPU: tiny random-init HF
transformers Llama (forward, backward, generate with KV cache, a left-padded batch, bf16, AdamW),
GPT-2 and BERT forwards, a ResNet-18 forward. Every test runs with the CPU fallback off
(FUELVK_TORCH_FALLBACK=0), so an aten op without a fuelvk kernel fails the test, naming the op."""
import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.nn as nn

import fuelvk.torch as ft

DEV = "fuelvk"


@pytest.fixture(autouse=True)
def no_fallback(monkeypatch):
    monkeypatch.setenv(ft._fallback.ENV, "0")
    ft.reset_fallback_stats()
    yield
    assert ft.fallback_stats() == {}


def _twins(model):
    """(CPU model, the same weights on the device)."""
    model.eval()
    return model, copy.deepcopy(model).to(DEV)


def _llama(dtype=torch.float32, layers=2):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   torch_dtype=dtype)
    return _twins(transformers.LlamaForCausalLM(cfg).to(dtype))


def _ids(b, s, vocab=96, seed=1):
    return torch.randint(0, vocab, (b, s), generator=torch.Generator().manual_seed(seed))


def test_llama_logits_and_grads_match_cpu():
    cpu, dev = _llama()
    ids = _ids(2, 8)
    ref = cpu(ids, labels=ids)
    out = dev(ids.to(DEV), labels=ids.to(DEV))
    assert out.logits.device.type == DEV
    torch.testing.assert_close(out.logits.cpu(), ref.logits, rtol=0, atol=1e-4)
    ref.loss.backward()
    out.loss.backward()
    grads = dict(dev.named_parameters())
    for name, p in cpu.named_parameters():
        g = grads[name].grad
        assert g.device.type == DEV, name
        err = (g.cpu() - p.grad).abs().max() / p.grad.abs().max()
        assert err < 1e-3, (name, err.item())


def test_llama_greedy_generate_with_kv_cache_matches_cpu():
    cpu, dev = _llama()
    ids = _ids(1, 5)
    kw = dict(max_new_tokens=8, do_sample=False, use_cache=True, pad_token_id=0)
    ref = cpu.generate(ids, **kw)
    got = dev.generate(ids.to(DEV), **kw)
    assert got.shape == (1, 13)
    assert torch.equal(got.cpu(), ref)


def test_llama_sampling_and_beam_search_match_cpu():
    """Seeded top-k/top-p sampling draws what the CPU draws (multinomial's exponential draw is the CPU
    generator's); beam search picks the same beams."""
    cpu, dev = _llama(layers=1)
    ids = _ids(2, 5)
    for kw in (dict(do_sample=True, top_k=10, top_p=0.9, temperature=0.7), dict(num_beams=2)):
        torch.manual_seed(7)
        want = cpu.generate(ids, max_new_tokens=4, pad_token_id=0, **kw)
        torch.manual_seed(7)
        got = dev.generate(ids.to(DEV), max_new_tokens=4, pad_token_id=0, **kw)
        assert torch.equal(got.cpu(), want), kw


def test_llama_left_padded_batch_matches_cpu():
    """Row 0 has 3 pad tokens on the left: the attention mask must reach attention (padded keys masked)."""
    cpu, dev = _llama()
    ids = _ids(2, 8)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[0, :3] = 0
    ref = cpu(ids, attention_mask=mask).logits
    got = dev(ids.to(DEV), attention_mask=mask.to(DEV)).logits.cpu()
    torch.testing.assert_close(got[mask.bool()], ref[mask.bool()], rtol=0, atol=1e-4)
    # the padded row's real tokens equal the same tokens run alone (the padding changed nothing)
    alone = cpu(ids[:1, 3:]).logits
    torch.testing.assert_close(got[0, 3:], alone[0], rtol=0, atol=1e-4)
    kw = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert torch.equal(dev.generate(ids.to(DEV), attention_mask=mask.to(DEV), **kw).cpu(),
                       cpu.generate(ids, attention_mask=mask, **kw))


def test_llama_bf16_forward_backward_runs():
    cpu, dev = _llama(torch.bfloat16)
    ids = _ids(2, 8)
    out = dev(ids.to(DEV), labels=ids.to(DEV))
    assert out.logits.dtype == torch.bfloat16
    out.loss.backward()
    ref = cpu(ids, labels=ids)
    ref.loss.backward()
    assert abs(out.loss.item() - ref.loss.item()) < 0.05 * abs(ref.loss.item())
    for name, p in dev.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.bfloat16, name
        assert torch.isfinite(p.grad.cpu().float()).all(), name


def test_llama_adamw_steps_track_cpu():
    cpu, dev = _llama(layers=1)   # (one layer: 20 steps on two models stay quick)
    cpu.train()
    dev.train()
    ids = _ids(2, 8)
    idd = ids.to(DEV)
    opt_c = torch.optim.AdamW(cpu.parameters(), lr=1e-3, foreach=False)
    opt_d = torch.optim.AdamW(dev.parameters(), lr=1e-3, foreach=False)
    for step in range(20):
        lc, ld = cpu(ids, labels=ids).loss, dev(idd, labels=idd).loss
        opt_c.zero_grad()
        opt_d.zero_grad()
        lc.backward()
        ld.backward()
        opt_c.step()
        opt_d.step()
        assert abs(ld.item() - lc.item()) < 1e-3, (step, ld.item(), lc.item())
    assert lc.item() < 4.4   # it learned (ln 96 = 4.56 at the start)


def test_gpt2_forward_matches_cpu():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=96, n_positions=32, n_embd=64, n_layer=2, n_head=4)
    cpu, dev = _twins(transformers.GPT2LMHeadModel(cfg))
    ids = _ids(2, 8)
    ref = cpu(ids).logits
    torch.testing.assert_close(dev(ids.to(DEV)).logits.cpu(), ref, rtol=0, atol=1e-4)


def test_bert_forward_matches_cpu():
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=96, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=32)
    cpu, dev = _twins(transformers.BertModel(cfg))
    ids = _ids(2, 8)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 6:] = 0
    ref = cpu(ids, attention_mask=mask)
    got = dev(ids.to(DEV), attention_mask=mask.to(DEV))
    torch.testing.assert_close(got.last_hidden_state.cpu(), ref.last_hidden_state, rtol=0, atol=1e-4)
    torch.testing.assert_close(got.pooler_output.cpu(), ref.pooler_output, rtol=0, atol=1e-4)


# -- ResNet-18 (torchvision's architecture; torchvision has no wheel beside torch 2.13+cpu here) ----------
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(nn.Module):
    def __init__(self, width=64, classes=1000):
        super().__init__()
        w = [width, width * 2, width * 4, width * 8]
        self.conv1 = nn.Conv2d(3, w[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], w[0]
        for i, c in enumerate(w):
            layers.append(nn.Sequential(BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(w[3], classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def test_resnet18_forward_matches_cpu():
    """The ResNet-18 architecture at width 16 (torchvision's is 64) on 32x32 images, eval mode."""
    torch.manual_seed(0)
    model = ResNet18(width=16, classes=10)
    with torch.no_grad():   # non-trivial running statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    cpu, dev = _twins(model)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        ref = cpu(x)
        got = dev(x.to(DEV)).cpu()
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)


def test_resnet18_trains_like_cpu():
    """Training mode (batch statistics, conv and batch-norm backward), two SGD steps."""
    torch.manual_seed(0)
    cpu, dev = _twins(ResNet18(width=8, classes=10))
    cpu.train()
    dev.train()
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([1, 0, 3, 9])
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (cpu, dev)]
    for _ in range(2):
        losses = []
        for m, opt, xx, yy in ((cpu, opts[0], x, y), (dev, opts[1], x.to(DEV), y.to(DEV))):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(m(xx), yy)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) < 1e-3, losses   # (batch norm over 4 values at 1x1 in layer4)
    params = dict(dev.named_parameters())
    for name, p in cpu.named_parameters():
        torch.testing.assert_close(params[name].detach().cpu(), p.detach(), rtol=1e-3, atol=1e-3, msg=name)

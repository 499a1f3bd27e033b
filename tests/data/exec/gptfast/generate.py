"""gpt-fast's decode loop (pytorch-labs/gpt-fast generate.py), cut down to a tiny random model:
main() rebinds the module's decode_one_token to torch.compile(decode_one_token,
fullgraph=True), prefill runs eagerly, decode_n_tokens calls the compiled step once per token
and hands each token to a callback that reads it back (gpt-fast's interactive callback,
``x.tolist()``). ``python generate.py BACKEND DEVICE [--no-fullgraph]``."""

import sys

import torch


def multinomial_sample_one_no_sync(probs_sort):  # does multinomial sampling without a sync
    q = torch.empty_like(probs_sort).exponential_(1)
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)


def logits_to_probs(logits, temperature: float = 1.0, top_k=None):
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        pivot = v.select(-1, -1).unsqueeze(-1)
        logits = torch.where(logits < pivot, -float("Inf"), logits)
    return torch.nn.functional.softmax(logits, dim=-1)


def sample(logits, temperature: float = 1.0, top_k=None):
    probs = logits_to_probs(logits[:, -1], temperature, top_k)
    idx_next = multinomial_sample_one_no_sync(probs)
    return idx_next, probs


class Transformer(torch.nn.Module):
    def __init__(self, vocab_size: int = 64, dim: int = 16) -> None:
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(vocab_size, dim)
        self.wq = torch.nn.Linear(dim, dim, bias=False)
        self.output = torch.nn.Linear(dim, vocab_size, bias=False)
        self.register_buffer("freqs", torch.linspace(0.0, 1.0, 32).unsqueeze(-1))

    def forward(self, idx, input_pos):
        x = self.tok_embeddings(idx)
        x = x + torch.tanh(self.wq(x)) * self.freqs[input_pos]
        return self.output(x)


def prefill(model, x, input_pos, **sampling_kwargs):
    logits = model(x, input_pos)
    return sample(logits, **sampling_kwargs)[0]


def decode_one_token(model, x, input_pos, **sampling_kwargs):
    assert input_pos.shape[-1] == 1
    logits = model(x, input_pos)
    return sample(logits, **sampling_kwargs)


def decode_n_tokens(model, cur_token, input_pos, num_new_tokens, callback=lambda _: _,
                    **sampling_kwargs):
    new_tokens, new_probs = [], []
    for _i in range(num_new_tokens):
        next_token, next_prob = decode_one_token(model, cur_token, input_pos, **sampling_kwargs)
        input_pos += 1
        new_tokens.append(next_token.clone())
        callback(new_tokens[-1])
        new_probs.append(next_prob.clone())
        cur_token = next_token.clone()
    return new_tokens, new_probs


@torch.no_grad()
def generate(model, prompt, max_new_tokens, callback=lambda x: x, **sampling_kwargs):
    device = prompt.device
    T = prompt.size(0)
    seq = torch.empty(T + max_new_tokens, dtype=prompt.dtype, device=device)
    seq[:T] = prompt
    input_pos = torch.arange(0, T, device=device)
    next_token = prefill(model, prompt.view(1, -1), input_pos, **sampling_kwargs).clone()
    seq[T:T + 1] = next_token.view(-1)
    input_pos = torch.tensor([T], device=device, dtype=torch.int)
    generated_tokens, _ = decode_n_tokens(model, next_token.view(1, -1), input_pos,
                                          max_new_tokens - 1, callback=callback,
                                          **sampling_kwargs)
    seq[T + 1:] = torch.cat(generated_tokens).view(-1)
    return seq


def main(backend, device, fullgraph):
    global decode_one_token
    torch.manual_seed(1234)
    model = Transformer().to(device)
    decode_one_token = torch.compile(decode_one_token, backend=backend, fullgraph=fullgraph)
    buffer = []
    prompt = torch.tensor([1, 5, 7, 9], device=device)
    y = generate(model, prompt, 6, callback=lambda x: buffer.append(x.tolist()), top_k=8)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    print(f"generated {y.size(0) - prompt.size(0)} tokens, {len(buffer)} streamed, "
          f"{graphs} graph(s)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--no-fullgraph" not in sys.argv)

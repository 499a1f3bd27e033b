"""Hugging Face ``generate()`` with an end-of-sequence token, on a tiny random Llama built
from a config (no download): the per-token stop check reads whether a sampled token was the
EOS, a value that depends on the model's output (``syncguard exec --lineage``)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    torch.manual_seed(0)
    dev = "cpu" if not hasattr(torch, "npu") else "npu"
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    model = LlamaForCausalLM(config).to(dev).eval()
    ids = torch.arange(1, 9).reshape(1, 8).to(dev)
    out = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=0,
                         eos_token_id=127)
    print(tuple(out.shape))


if __name__ == "__main__":
    main()

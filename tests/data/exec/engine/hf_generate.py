"""Hugging Face ``generate()`` on a tiny random Llama built from a config (no download), on the
simulated npu under ``syncguard exec --device sim``:

    python hf_generate.py greedy|sample|beam [--tokens N]

The per-token read is the stopping criteria's check in the decoding loop; the first forward
(the prompt) is made by a prefill helper; beam search reads a few values after its loop.
"""

import sys

import torch
import torch_npu  # noqa: F401  (syncguard's stand-in under --device sim)
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "greedy"
    tokens = int(sys.argv[sys.argv.index("--tokens") + 1]) if "--tokens" in sys.argv else 12
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    model = LlamaForCausalLM(config).to("npu").eval()
    ids = torch.arange(1, 9).reshape(1, 8).to("npu")
    kwargs = dict(max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=0,
                  eos_token_id=None)
    if mode == "sample":
        kwargs.update(do_sample=True, top_k=20)
    elif mode == "beam":
        kwargs.update(do_sample=False, num_beams=2, early_stopping=False)
    else:
        kwargs.update(do_sample=False)
    out = model.generate(ids, **kwargs)
    print(mode, tuple(out.shape))


if __name__ == "__main__":
    main()

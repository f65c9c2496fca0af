"""The PyTorch seq2seq tutorial counts its iterations with `for iter in range(1, n_iters + 1)`,
shadowing the builtin at module level (here an encoder-decoder step in the loop itself), and
names its batch `input`: the helpers a patch adds read `iter` and must not read this one."""
import torch
from torch import nn

encoder = nn.GRU(16, 32, batch_first=True).cuda()
decoder = nn.Linear(32, 10).cuda()
model = nn.ModuleDict({"encoder": encoder, "decoder": decoder})
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.CrossEntropyLoss()
pairs = [(torch.randn(8, 12, 16, device="cuda"), torch.randint(0, 10, (8,), device="cuda")) for _ in range(16)]

print_loss_total = 0.0
_cg_compiled_encoder = torch.compile(encoder, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_decoder = torch.compile(decoder, mode="reduce-overhead")  # cg-advise: scope compile

for iter in range(1, 201):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    input, target = pairs[iter % len(pairs)]
    optimizer.zero_grad()
    _, hidden = _cg_compiled_encoder(input)
    loss = criterion(_cg_compiled_decoder(hidden[-1]), target)
    loss.backward()
    optimizer.step()
    print_loss_total += loss.item()
    if iter % 50 == 0:
        print(f"iter {iter} avg loss {print_loss_total / 50:.4f}")
        print_loss_total = 0.0

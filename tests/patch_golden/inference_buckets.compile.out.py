import torch
from torch import nn


@torch.inference_mode()
def serve(model, requests):
    results = []
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for request in requests:  # batch sizes vary from request to request
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        logits = _cg_compiled_model(request)
        results.append(logits.argmax(dim=-1))
    return results


if __name__ == "__main__":
    net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256), nn.GELU(),
                        nn.Linear(256, 10)).cuda().eval()
    sizes = torch.randint(1, 65, (300,)).tolist()
    answers = serve(net, [torch.randn(n, 64, device="cuda") for n in sizes])
    print(sum(a.numel() for a in answers), "predictions")

This is a shell note, not Python:
export CUDA_VISIBLE_DEVICES=0

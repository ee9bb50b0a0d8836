"""``ddp``: plain data parallel with one flat all-reduce of the gradients per step."""

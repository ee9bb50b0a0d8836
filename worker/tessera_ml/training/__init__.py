"""Data-parallel training as several algorithms read it alike: ``config`` (torch-free, for
job metadata) and ``pieces`` (shard, rows per step, loss, optimizer, evaluation). ``ddp`` and
``hier_sync`` both build on them, so a run of one compares parameter for parameter with the
other."""

"""The benchmark of ``ddp`` (``tessera bench ddp``) and its measuring tools."""

"""The benchmark of ``split_nn`` (``tessera bench split_nn``) and its measuring tools."""

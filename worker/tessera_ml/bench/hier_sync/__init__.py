"""The benchmark of ``hier_sync`` (``tessera bench hier_sync``) and its measuring tools."""

"""The benchmark of ``zo_pair`` (``tessera bench zo_pair``) and its measuring tools."""

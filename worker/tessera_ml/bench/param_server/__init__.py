"""The benchmark of ``param_server`` (``tessera bench param_server``) and its measuring tools."""

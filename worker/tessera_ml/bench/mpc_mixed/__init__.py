"""The benchmark of ``mpc_mixed`` (``tessera bench mpc_mixed``) and its measuring tools."""

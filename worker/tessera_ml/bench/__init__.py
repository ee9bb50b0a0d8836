"""``tessera bench NAME``: an algorithm and its baseline, side by side in one run."""

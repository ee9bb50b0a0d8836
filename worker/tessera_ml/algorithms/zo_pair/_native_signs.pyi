def add(
    out: int,
    base: int,
    n: int,
    start: int,
    key: int,
    alpha: float,
    is_double: bool,
    /,
) -> None: ...
def word(key: int, j: int, /) -> int: ...

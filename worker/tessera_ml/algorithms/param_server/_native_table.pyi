def find(index: int, capacity: int, keys: int, rows: int, n: int, threads: int, /) -> int: ...
def insert(
    index: int, capacity: int, keys: int, rows: int, n: int, first_row: int, threads: int, /
) -> int: ...
def rehash(old: int, old_capacity: int, index: int, capacity: int, threads: int, /) -> None: ...
def ids(index: int, capacity: int, ids: int, threads: int, /) -> None: ...
def init(
    blocks: int,
    shift: int,
    width: int,
    dim: int,
    rows: int,
    keys: int,
    n: int,
    first_row: int,
    seed_hash: int,
    step: float,
    offset: float,
    threads: int,
    /,
) -> None: ...
def gather(
    blocks: int,
    shift: int,
    width: int,
    columns: int,
    rows: int,
    keys: int,
    n: int,
    values: int,
    seed_hash: int,
    step: float,
    offset: float,
    threads: int,
    /,
) -> None: ...
def update(
    kind: int,
    blocks: int,
    shift: int,
    width: int,
    rows: int,
    n: int,
    values: int,
    column: int,
    value: float,
    threads: int,
    /,
) -> None: ...
def mix64(x: int, /) -> int: ...
def find_insert(
    index: int,
    capacity: int,
    keys: int,
    rows: int,
    n: int,
    first_row: int,
    max_rows: int,
    blocks: int,
    shift: int,
    width: int,
    dim: int,
    seed_hash: int,
    step: float,
    offset: float,
    /,
) -> tuple[int, int]: ...

/* The compiled core of the dynamic embedding table.
 *
 * Stateless functions over memory the Python side owns (torch tensors, passed as addresses):
 *
 * - the hash index: `cap` entries of three int32 words, an int64 id then its row (-1: empty),
 *   open addressing with linear probing, home slot = a 64-bit mix of the id scaled to `cap`
 *   (monotone in the mix);
 * - the rows: blocks of `1 << shift` rows of `width` float32, one address per block.
 *
 * Ids handed to `insert` are unique and absent, so concurrent inserters only race for empty
 * slots (compare-and-swap on the row word) and never compare ids. Batches above a size are
 * split over `threads` threads; every function releases the GIL.
 *
 * Beside the table, `group` lays out a worker's batch for the servers: its distinct ids grouped
 * by the server that owns them (a small hash set of its own, freed on return).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define INDEX_SALT 0x1DEULL
#define PREFETCH_AHEAD 16 /* index slots; a power of two: the ring of home slots below */
#define GATHER_AHEAD 64   /* rows */
#define MIN_PER_THREAD 16384
#define MAX_THREADS 64
#define LOW24 0xFFFFFFULL

/* Loops that initialise rows or hash runs of ids, compiled also for AVX2 and AVX-512 (64-bit
 * multiplies in vectors), the variant picked when the module loads. Integer arithmetic and
 * float multiply then subtract (never fused: -ffp-contract=off) give the same bits on every
 * variant. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && __GNUC__ >= 11 && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t home_slot(int64_t key, uint64_t cap)
{
    uint64_t h = mix64((uint64_t)key ^ INDEX_SALT);
    return (uint64_t)(((unsigned __int128)h * cap) >> 64);
}

static inline int64_t entry_key(const int32_t *index, uint64_t slot)
{
    int64_t key;
    memcpy(&key, index + 3 * slot, sizeof key);
    return key;
}

static inline float *row_at(float *const *blocks, int shift, int64_t width, int64_t row)
{
    return blocks[row >> shift] + (row & ((1LL << shift) - 1)) * width;
}

/* ---- a parallel for over [0, n) ------------------------------------------------------ */

typedef void (*range_fn)(void *ctx, Py_ssize_t lo, Py_ssize_t hi);

typedef struct {
    range_fn fn;
    void *ctx;
    Py_ssize_t lo, hi;
} chunk_t;

static void *run_chunk(void *arg)
{
    chunk_t *c = (chunk_t *)arg;
    c->fn(c->ctx, c->lo, c->hi);
    return NULL;
}

/* How many threads parallel_for uses for n items. */
static int thread_count(int threads, Py_ssize_t n)
{
    Py_ssize_t most = n / MIN_PER_THREAD;
    int t = threads < 1 ? 1 : (threads > MAX_THREADS ? MAX_THREADS : threads);
    if (most < t)
        t = most < 1 ? 1 : (int)most;
    return t;
}

static void parallel_for(int threads, Py_ssize_t n, range_fn fn, void *ctx)
{
    int t = thread_count(threads, n);
    if (t == 1) {
        fn(ctx, 0, n);
        return;
    }
    chunk_t chunks[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS];
    for (int i = 0; i < t; i++) {
        chunks[i] = (chunk_t){fn, ctx, n * i / t, n * (i + 1) / t};
        started[i] = 0;
    }
    for (int i = 1; i < t; i++)
        started[i] = pthread_create(&ids[i], NULL, run_chunk, &chunks[i]) == 0;
    run_chunk(&chunks[0]);
    for (int i = 1; i < t; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            run_chunk(&chunks[i]);
    }
}

/* ---- find ------------------------------------------------------------------------------ */

/* Home slots computed PREFETCH_AHEAD keys early (and their index entries prefetched), kept in
 * a ring so each key is hashed once. */
#define RING_MASK (PREFETCH_AHEAD - 1)

static inline void ring_fill(uint64_t *ring, const int64_t *keys, Py_ssize_t lo, Py_ssize_t hi,
                             const int32_t *index, uint64_t cap)
{
    for (Py_ssize_t i = lo; i < hi && i < lo + PREFETCH_AHEAD; i++) {
        ring[i & RING_MASK] = home_slot(keys[i], cap);
        __builtin_prefetch(index + 3 * ring[i & RING_MASK], 1);
    }
}

/* The home slot of key i; computes and prefetches that of key i + PREFETCH_AHEAD. */
static inline uint64_t ring_next(uint64_t *ring, const int64_t *keys, Py_ssize_t i,
                                 Py_ssize_t hi, const int32_t *index, uint64_t cap)
{
    uint64_t slot = ring[i & RING_MASK];
    Py_ssize_t ahead = i + PREFETCH_AHEAD;
    if (ahead < hi) {
        uint64_t next = home_slot(keys[ahead], cap);
        ring[ahead & RING_MASK] = next;
        __builtin_prefetch(index + 3 * next, 1);
    }
    return slot;
}

typedef struct {
    const int32_t *index;
    uint64_t cap;
    const int64_t *keys;
    int64_t *rows;
} find_ctx;

static void find_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    find_ctx *c = (find_ctx *)arg;
    const int32_t *index = c->index;
    const int64_t *keys = c->keys;
    uint64_t cap = c->cap;
    uint64_t ring[PREFETCH_AHEAD];
    ring_fill(ring, keys, lo, hi, index, cap);
    for (Py_ssize_t i = lo; i < hi; i++) {
        uint64_t slot = ring_next(ring, keys, i, hi, index, cap);
        int64_t key = keys[i];
        int32_t row;
        while ((row = index[3 * slot + 2]) >= 0 && entry_key(index, slot) != key)
            if (++slot == cap)
                slot = 0;
        c->rows[i] = row;
    }
}

static PyObject *py_find(PyObject *self, PyObject *args)
{
    unsigned long long index, keys, rows;
    unsigned long long cap;
    Py_ssize_t n;
    int threads;
    if (!PyArg_ParseTuple(args, "KKKKni", &index, &cap, &keys, &rows, &n, &threads))
        return NULL;
    find_ctx c = {(const int32_t *)index, cap, (const int64_t *)keys, (int64_t *)rows};
    Py_ssize_t missing = 0;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(threads, n, find_range, &c);
    for (Py_ssize_t i = 0; i < n; i++)
        missing += c.rows[i] < 0;
    Py_END_ALLOW_THREADS;
    return PyLong_FromSsize_t(missing);
}

/* ---- insert ---------------------------------------------------------------------------- */

typedef struct {
    int32_t *index;
    uint64_t cap;
    const int64_t *keys;
    const int64_t *rows;
    int64_t first_row;
    int shared; /* other threads place into the same index */
} place_ctx;

/* Enter key with its row from `slot` on. Alone, a plain store takes the first empty slot;
 * shared, a compare-and-swap on the row word claims it. */
static inline void place(int32_t *index, uint64_t cap, uint64_t slot, int64_t key, int32_t row,
                         int shared)
{
    for (;;) {
        int32_t *word = index + 3 * slot + 2;
        if (*word < 0) {
            if (!shared) {
                *word = row;
                memcpy(index + 3 * slot, &key, sizeof key);
                return;
            }
            int32_t expected = -1;
            if (__atomic_compare_exchange_n(word, &expected, row, 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
                memcpy(index + 3 * slot, &key, sizeof key);
                return;
            }
        }
        if (++slot == cap)
            slot = 0;
    }
}

static void place_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    place_ctx *c = (place_ctx *)arg;
    uint64_t ring[PREFETCH_AHEAD];
    ring_fill(ring, c->keys, lo, hi, c->index, c->cap);
    for (Py_ssize_t i = lo; i < hi; i++) {
        uint64_t slot = ring_next(ring, c->keys, i, hi, c->index, c->cap);
        if (c->rows[i] >= c->first_row)
            place(c->index, c->cap, slot, c->keys[i], (int32_t)c->rows[i], c->shared);
    }
}

/* rows[i] < 0 marks an absent id: it gets row first_row + (its rank among the absent), in
 * batch order, and enters the index. Returns how many rows were created. */
static PyObject *py_insert(PyObject *self, PyObject *args)
{
    unsigned long long index, cap, keys, rows;
    Py_ssize_t n;
    long long first_row;
    int threads;
    if (!PyArg_ParseTuple(args, "KKKKnLi", &index, &cap, &keys, &rows, &n, &first_row, &threads))
        return NULL;
    int64_t *r = (int64_t *)rows;
    int64_t next = first_row;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++)
        if (r[i] < 0)
            r[i] = next++;
    place_ctx c = {(int32_t *)index, cap, (const int64_t *)keys, r, first_row,
                   thread_count(threads, n) > 1};
    parallel_for(threads, n, place_range, &c);
    Py_END_ALLOW_THREADS;
    return PyLong_FromLongLong(next - first_row);
}

/* ---- rehash and export ----------------------------------------------------------------- */

typedef struct {
    const int32_t *old;
    int32_t *index;
    uint64_t cap;
    int64_t *ids;
    int shared;
} scan_ctx;

static void rehash_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    scan_ctx *c = (scan_ctx *)arg;
    for (Py_ssize_t s = lo; s < hi; s++) {
        int32_t row = c->old[3 * s + 2];
        if (row >= 0) {
            int64_t key = entry_key(c->old, (uint64_t)s);
            place(c->index, c->cap, home_slot(key, c->cap), key, row, c->shared);
        }
    }
}

/* A rehash on one thread, a chunk of entries at a time: the chunk's entries are first
 * gathered without a branch, then all their new home slots computed, then entered; kept
 * apart, the steps pipeline instead of stalling on each entry's mispredicted branches. Home
 * slots are monotone in the mix, so the new index fills nearly in order. */
#define REHASH_CHUNK 512

VECTOR_CLONES static void rehash_serial(const int32_t *old, uint64_t old_cap, int32_t *index,
                                        uint64_t cap)
{
    int64_t keys[REHASH_CHUNK];
    int32_t rows[REHASH_CHUNK];
    uint64_t homes[REHASH_CHUNK];
    uint64_t s = 0;
    while (s < old_cap) {
        int m = 0;
        for (; s < old_cap && m < REHASH_CHUNK; s++) {
            int32_t row = old[3 * s + 2];
            keys[m] = entry_key(old, s);
            rows[m] = row;
            m += row >= 0;
        }
        for (int j = 0; j < m; j++)
            homes[j] = home_slot(keys[j], cap);
        for (int j = 0; j < m; j++)
            place(index, cap, homes[j], keys[j], rows[j], 0);
    }
}

/* Enter every entry of `old` into the empty `index`. */
static PyObject *py_rehash(PyObject *self, PyObject *args)
{
    unsigned long long old, old_cap, index, cap;
    int threads;
    if (!PyArg_ParseTuple(args, "KKKKi", &old, &old_cap, &index, &cap, &threads))
        return NULL;
    scan_ctx c = {(const int32_t *)old, (int32_t *)index, cap, NULL,
                  thread_count(threads, (Py_ssize_t)old_cap) > 1};
    Py_BEGIN_ALLOW_THREADS;
    if (c.shared)
        parallel_for(threads, (Py_ssize_t)old_cap, rehash_range, &c);
    else
        rehash_serial(c.old, old_cap, c.index, cap);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

static void ids_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    scan_ctx *c = (scan_ctx *)arg;
    for (Py_ssize_t s = lo; s < hi; s++) {
        int32_t row = c->old[3 * s + 2];
        if (row >= 0)
            c->ids[row] = entry_key(c->old, (uint64_t)s);
    }
}

/* ids[row] = the id of every row in the index */
static PyObject *py_ids(PyObject *self, PyObject *args)
{
    unsigned long long index, cap, ids;
    int threads;
    if (!PyArg_ParseTuple(args, "KKKi", &index, &cap, &ids, &threads))
        return NULL;
    scan_ctx c = {(const int32_t *)index, NULL, 0, (int64_t *)ids, 0};
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(threads, (Py_ssize_t)cap, ids_range, &c);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

/* ---- rows ------------------------------------------------------------------------------ */

typedef struct {
    float *const *blocks;
    int shift;
    int64_t width;
    int64_t cols;
    const int64_t *rows;
    const int64_t *keys;
    float *values;
    int64_t first_row;
    uint64_t seed_hash;
    float step;
    float offset;
    int64_t column;
    int64_t dim;
    float value;
} rows_ctx;

/* init_rows of hashing.py, bit for bit: column j of id k is the top 24 bits of
 * mix64(k ^ mix64(seed)) * (mix64(j) | 1), times step, minus offset. */
#define MAX_INIT_COLUMNS 4096

static void column_multipliers(uint64_t *out, int64_t dim)
{
    for (int64_t j = 0; j < dim; j++)
        out[j] = mix64((uint64_t)j) | 1;
}

static inline void init_row(float *out, int64_t key, int64_t dim, const uint64_t *multipliers,
                            uint64_t seed_hash, float step, float offset)
{
    uint64_t base = mix64((uint64_t)key ^ seed_hash);
    for (int64_t j = 0; j < dim; j++) {
        uint64_t bits = ((base * multipliers[j]) >> 40) & LOW24;
        float u = (float)(int32_t)bits * step;
        out[j] = u - offset;
    }
}

static inline void copy_floats(float *dst, const float *src, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = src[j];
}

VECTOR_CLONES static void init_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    rows_ctx *c = (rows_ctx *)arg;
    uint64_t multipliers[MAX_INIT_COLUMNS];
    column_multipliers(multipliers, c->dim);
    for (Py_ssize_t i = lo; i < hi; i++) {
        int64_t row = c->rows[i];
        if (row < c->first_row)
            continue;
        float *dst = row_at(c->blocks, c->shift, c->width, row);
        init_row(dst, c->keys[i], c->dim, multipliers, c->seed_hash, c->step, c->offset);
        memset(dst + c->dim, 0, (size_t)(c->width - c->dim) * sizeof(float));
    }
}

/* Rows numbered first_row and above get their initial embedding and zero state. */
static PyObject *py_init(PyObject *self, PyObject *args)
{
    unsigned long long blocks, rows, keys, seed_hash;
    int shift, threads;
    long long width, dim, first_row;
    Py_ssize_t n;
    float step, offset;
    if (!PyArg_ParseTuple(args, "KiLLKKnLKffi", &blocks, &shift, &width, &dim, &rows, &keys, &n,
                          &first_row, &seed_hash, &step, &offset, &threads))
        return NULL;
    rows_ctx c = {0};
    c.blocks = (float *const *)blocks;
    c.shift = shift;
    c.width = width;
    c.dim = dim;
    c.rows = (const int64_t *)rows;
    c.keys = (const int64_t *)keys;
    c.first_row = first_row;
    c.seed_hash = seed_hash;
    c.step = step;
    c.offset = offset;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(threads, n, init_range, &c);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

typedef struct {
    int32_t *index;
    uint64_t cap;
    const int64_t *keys;
    int64_t *rows;
    Py_ssize_t n;
    int64_t max_rows;
    float *const *blocks;
    int shift;
    int64_t width;
    int64_t dim;
    uint64_t seed_hash;
    float step;
    float offset;
} find_insert_ctx;

/* The loop of find_insert: ids from keys[0] on, rows created from *next_row until max_rows;
 * returns how many ids it processed. */
VECTOR_CLONES static Py_ssize_t find_insert_loop(const find_insert_ctx *c, int64_t *next_row)
{
    int32_t *index = c->index;
    const int64_t *keys = c->keys;
    uint64_t cap = c->cap;
    Py_ssize_t n = c->n;
    int64_t next = *next_row;
    uint64_t multipliers[MAX_INIT_COLUMNS];
    column_multipliers(multipliers, c->dim);
    uint64_t ring[PREFETCH_AHEAD];
    ring_fill(ring, keys, 0, n, index, cap);
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        uint64_t slot = ring_next(ring, keys, i, n, index, cap);
        int64_t key = keys[i];
        int32_t row;
        while ((row = index[3 * slot + 2]) >= 0 && entry_key(index, slot) != key)
            if (++slot == cap)
                slot = 0;
        if (row >= 0) {
            c->rows[i] = row;
            continue;
        }
        if (next >= c->max_rows)
            break;
        memcpy(index + 3 * slot, &key, sizeof key);
        index[3 * slot + 2] = (int32_t)next;
        float *dst = row_at(c->blocks, c->shift, c->width, next);
        init_row(dst, key, c->dim, multipliers, c->seed_hash, c->step, c->offset);
        memset(dst + c->dim, 0, (size_t)(c->width - c->dim) * sizeof(float));
        c->rows[i] = next++;
    }
    *next_row = next;
    return i;
}

/* One pass over the batch on the calling thread: each id is found or, when absent, takes the
 * next row (batch order), enters the index and gets its initial values, until the table
 * would exceed max_rows. Returns (ids processed, rows created). */
static PyObject *py_find_insert(PyObject *self, PyObject *args)
{
    unsigned long long index, cap, keys, rows, blocks, seed_hash;
    Py_ssize_t n;
    long long first_row, max_rows, width, dim;
    int shift;
    float step, offset;
    if (!PyArg_ParseTuple(args, "KKKKnLLKiLLKff", &index, &cap, &keys, &rows, &n, &first_row,
                          &max_rows, &blocks, &shift, &width, &dim, &seed_hash, &step, &offset))
        return NULL;
    find_insert_ctx c = {
        .index = (int32_t *)index, .cap = cap, .keys = (const int64_t *)keys,
        .rows = (int64_t *)rows, .n = n, .max_rows = max_rows,
        .blocks = (float *const *)blocks, .shift = shift, .width = width, .dim = dim,
        .seed_hash = seed_hash, .step = step, .offset = offset,
    };
    int64_t next = first_row;
    Py_ssize_t done;
    Py_BEGIN_ALLOW_THREADS;
    done = find_insert_loop(&c, &next);
    Py_END_ALLOW_THREADS;
    return Py_BuildValue("nL", done, (long long)(next - first_row));
}

VECTOR_CLONES static void gather_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    rows_ctx *c = (rows_ctx *)arg;
    int64_t cols = c->cols;
    uint64_t multipliers[MAX_INIT_COLUMNS];
    column_multipliers(multipliers, cols < MAX_INIT_COLUMNS ? cols : MAX_INIT_COLUMNS);
    for (Py_ssize_t i = lo; i < hi; i++) {
        if (i + GATHER_AHEAD < hi && c->rows[i + GATHER_AHEAD] >= 0)
            __builtin_prefetch(row_at(c->blocks, c->shift, c->width, c->rows[i + GATHER_AHEAD]));
        int64_t row = c->rows[i];
        float *dst = c->values + i * cols;
        if (row >= 0)
            copy_floats(dst, row_at(c->blocks, c->shift, c->width, row), cols);
        else
            init_row(dst, c->keys[i], cols, multipliers, c->seed_hash, c->step, c->offset);
    }
}
/* values[i] = the first `cols` columns of row rows[i]; row -1: the initial value of keys[i]. */
static PyObject *py_gather(PyObject *self, PyObject *args)
{
    unsigned long long blocks, rows, keys, values, seed_hash;
    int shift, threads;
    long long width, cols;
    Py_ssize_t n;
    float step, offset;
    if (!PyArg_ParseTuple(args, "KiLLKKnKKffi", &blocks, &shift, &width, &cols, &rows, &keys, &n,
                          &values, &seed_hash, &step, &offset, &threads))
        return NULL;
    rows_ctx c = {0};
    c.blocks = (float *const *)blocks;
    c.shift = shift;
    c.width = width;
    c.cols = cols;
    c.rows = (const int64_t *)rows;
    c.keys = (const int64_t *)keys;
    c.values = (float *)values;
    c.seed_hash = seed_hash;
    c.step = step;
    c.offset = offset;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(threads, n, gather_range, &c);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

static void scatter_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    rows_ctx *c = (rows_ctx *)arg;
    size_t bytes = (size_t)c->width * sizeof(float);
    for (Py_ssize_t i = lo; i < hi; i++)
        memcpy(row_at(c->blocks, c->shift, c->width, c->rows[i]), c->values + i * c->width,
               bytes);
}

static void touch_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    rows_ctx *c = (rows_ctx *)arg;
    for (Py_ssize_t i = lo; i < hi; i++) {
        float *row = row_at(c->blocks, c->shift, c->width, c->rows[i]);
        row[c->width - 2] = c->value;
        row[c->width - 1] += 1.0f;
    }
}

static void bump_range(void *arg, Py_ssize_t lo, Py_ssize_t hi)
{
    rows_ctx *c = (rows_ctx *)arg;
    for (Py_ssize_t i = lo; i < hi; i++) {
        float *cell = row_at(c->blocks, c->shift, c->width, c->rows[i]) + c->column;
        *cell += 1.0f;
        c->values[i] = *cell;
    }
}

/* kind 0: rows[i] = values[i] (full width); kind 1: the last two columns become (value,
 * count + 1); kind 2: column `column` grows by one and values[i] receives it. Rows unique. */
static PyObject *py_update(PyObject *self, PyObject *args)
{
    unsigned long long blocks, rows, values;
    int shift, kind, threads;
    long long width, column;
    Py_ssize_t n;
    float value;
    if (!PyArg_ParseTuple(args, "iKiLKnKLfi", &kind, &blocks, &shift, &width, &rows, &n, &values,
                          &column, &value, &threads))
        return NULL;
    rows_ctx c = {0};
    c.blocks = (float *const *)blocks;
    c.shift = shift;
    c.width = width;
    c.rows = (const int64_t *)rows;
    c.values = (float *)values;
    c.column = column;
    c.value = value;
    range_fn fn = kind == 0 ? scatter_range : (kind == 1 ? touch_range : bump_range);
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(threads, n, fn, &c);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

/* ---- a worker's batch: its distinct ids, grouped by server ------------------------------ */

/* keys[n] -> out[u]: the distinct keys in order of first occurrence, stably grouped by
 * shard = (mix64(key ^ shard_salt) >> 1) % shards; inverse[i]: the position in out of keys[i];
 * counts[shards]: keys per shard. Returns u, or -1 when scratch memory cannot be had. */
static Py_ssize_t group_keys(const int64_t *keys, Py_ssize_t n, uint64_t shard_salt,
                             int64_t shards, int64_t *out, int64_t *inverse, int64_t *counts)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n)
        cap <<= 1;
    int64_t *slot_key = malloc(cap * sizeof *slot_key);
    int32_t *slot_at = malloc(cap * sizeof *slot_at);
    int64_t *distinct = malloc((n ? n : 1) * sizeof *distinct);
    int64_t *where = malloc((n ? n : 1) * sizeof *where);
    int64_t *next = calloc((size_t)shards, sizeof *next);
    Py_ssize_t u = -1;
    if (!slot_key || !slot_at || !distinct || !where || !next)
        goto done;
    memset(slot_at, 0xFF, cap * sizeof *slot_at);
    uint64_t mask = cap - 1;
    u = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t key = keys[i];
        uint64_t s = mix64((uint64_t)key ^ INDEX_SALT) & mask;
        while (slot_at[s] >= 0 && slot_key[s] != key)
            s = (s + 1) & mask;
        if (slot_at[s] < 0) {
            slot_key[s] = key;
            slot_at[s] = (int32_t)u;
            distinct[u++] = key;
        }
        inverse[i] = slot_at[s];
    }
    memset(counts, 0, (size_t)shards * sizeof *counts);
    for (Py_ssize_t j = 0; j < u; j++) {
        where[j] = (int64_t)((mix64((uint64_t)distinct[j] ^ shard_salt) >> 1) % (uint64_t)shards);
        counts[where[j]]++;
    }
    for (int64_t k = 1; k < shards; k++)
        next[k] = next[k - 1] + counts[k - 1];
    for (Py_ssize_t j = 0; j < u; j++) {
        int64_t at = next[where[j]]++;
        out[at] = distinct[j];
        where[j] = at;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        inverse[i] = where[inverse[i]];
done:
    free(slot_key);
    free(slot_at);
    free(distinct);
    free(where);
    free(next);
    return u;
}

static PyObject *py_group(PyObject *self, PyObject *args)
{
    unsigned long long keys, out, inverse, counts, shard_salt;
    Py_ssize_t n;
    long long shards;
    if (!PyArg_ParseTuple(args, "KnKLKKK", &keys, &n, &shard_salt, &shards, &out, &inverse,
                          &counts))
        return NULL;
    if (shards < 1 || n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "group: shards must be >= 1 and n < 2**31");
        return NULL;
    }
    Py_ssize_t u;
    Py_BEGIN_ALLOW_THREADS;
    u = group_keys((const int64_t *)keys, n, shard_salt, shards, (int64_t *)out,
                   (int64_t *)inverse, (int64_t *)counts);
    Py_END_ALLOW_THREADS;
    if (u < 0)
        return PyErr_NoMemory();
    return PyLong_FromSsize_t(u);
}

static PyObject *py_mix64(PyObject *self, PyObject *args)
{
    unsigned long long x;
    if (!PyArg_ParseTuple(args, "K", &x))
        return NULL;
    return PyLong_FromUnsignedLongLong(mix64(x));
}

static PyMethodDef methods[] = {
    {"find", py_find, METH_VARARGS, "rows of ids in the index (-1: absent); returns #absent"},
    {"find_insert", py_find_insert, METH_VARARGS, "find or create ids in one serial pass"},
    {"insert", py_insert, METH_VARARGS, "number and index the absent ids; returns #created"},
    {"rehash", py_rehash, METH_VARARGS, "enter every entry of one index into another"},
    {"ids", py_ids, METH_VARARGS, "the id of every row"},
    {"init", py_init, METH_VARARGS, "initial values of newly created rows"},
    {"gather", py_gather, METH_VARARGS, "copy rows out (initial values for absent ids)"},
    {"update", py_update, METH_VARARGS, "write rows, mark them used, or count sightings"},
    {"mix64", py_mix64, METH_VARARGS, "the splitmix64 finaliser"},
    {"group", py_group, METH_VARARGS, "a batch's distinct ids, grouped by shard"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native_table", "The compiled core of the dynamic table.", -1, methods,
};

PyMODINIT_FUNC PyInit__native_table(void) { return PyModule_Create(&module); }

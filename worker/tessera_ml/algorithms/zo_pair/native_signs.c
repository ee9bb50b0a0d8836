/* Rademacher z of zo_pair, added into a tensor in one pass (see signs.py for the stream).
 *
 * Element e of the stream of key k is +1 where bit (e mod 64) of word(k, e / 64) is set and -1
 * where it is not; word(k, j) is the splitmix64 output for the state k + (j + 1) * golden.
 * Each call covers elements [start, start + n) and writes out[i] = base[i] + alpha * z(start + i)
 * (or alpha * z(start + i) where no base is given), eight elements per byte of a word through a
 * table of the 256 sign patterns times alpha. out may be base. A long range is split over up to
 * `threads` threads, at word boundaries; every element's value is the same however it is split. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL

static inline uint64_t word_at(uint64_t key, uint64_t j) {
    uint64_t z = key + (j + 1) * GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline int bit_at(uint64_t key, uint64_t e) {
    return (int)((word_at(key, e >> 6) >> (e & 63)) & 1);
}

#define DEFINE_ADD(NAME, T)                                                                    \
    static void NAME(T *out, const T *base, int64_t n, uint64_t start, uint64_t key, T alpha) { \
        T table[256][8];                                                                       \
        for (int b = 0; b < 256; b++)                                                          \
            for (int k = 0; k < 8; k++) table[b][k] = ((b >> k) & 1) ? alpha : -alpha;         \
        int64_t i = 0;                                                                         \
        for (; i < n && ((start + (uint64_t)i) & 7); i++) {                                    \
            T s = bit_at(key, start + (uint64_t)i) ? alpha : -alpha;                           \
            out[i] = base ? base[i] + s : s;                                                   \
        }                                                                                      \
        uint64_t current = UINT64_MAX, word = 0;                                               \
        for (; i + 8 <= n; i += 8) {                                                           \
            uint64_t e = start + (uint64_t)i;                                                  \
            if ((e >> 6) != current) {                                                         \
                current = e >> 6;                                                              \
                word = word_at(key, current);                                                  \
            }                                                                                  \
            const T *t = table[(word >> (e & 63)) & 0xFF];                                     \
            if (base) {                                                                        \
                for (int k = 0; k < 8; k++) out[i + k] = base[i + k] + t[k];                   \
            } else {                                                                           \
                for (int k = 0; k < 8; k++) out[i + k] = t[k];                                 \
            }                                                                                  \
        }                                                                                      \
        for (; i < n; i++) {                                                                   \
            T s = bit_at(key, start + (uint64_t)i) ? alpha : -alpha;                           \
            out[i] = base ? base[i] + s : s;                                                   \
        }                                                                                      \
    }

DEFINE_ADD(add_f32, float)
DEFINE_ADD(add_f64, double)

#define MIN_PER_THREAD (1 << 16)
#define MAX_THREADS 64

typedef struct {
    char *out;
    const char *base;
    int64_t n;
    uint64_t start, key;
    double alpha;
    int is_double;
} Range;

static void run_range(const Range *r) {
    if (r->is_double)
        add_f64((double *)r->out, (const double *)r->base, r->n, r->start, r->key, r->alpha);
    else
        add_f32((float *)r->out, (const float *)r->base, r->n, r->start, r->key, (float)r->alpha);
}

static void *run_range_thread(void *arg) {
    run_range((const Range *)arg);
    return NULL;
}

static void run_split(Range whole, int threads) {
    int64_t most = whole.n / MIN_PER_THREAD;
    if (threads > most) threads = (int)most;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1) {
        run_range(&whole);
        return;
    }
    size_t size = whole.is_double ? sizeof(double) : sizeof(float);
    int64_t chunk = ((whole.n + threads - 1) / threads + 63) / 64 * 64;
    Range parts[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    int count = 0;
    for (int64_t done = 0; done < whole.n; done += chunk, count++) {
        Range *r = &parts[count];
        *r = whole;
        r->out = whole.out + (size_t)done * size;
        r->base = whole.base ? whole.base + (size_t)done * size : NULL;
        r->n = whole.n - done < chunk ? whole.n - done : chunk;
        r->start = whole.start + (uint64_t)done;
    }
    for (int t = 1; t < count; t++)
        started[t] = pthread_create(&ids[t], NULL, run_range_thread, &parts[t]) == 0;
    run_range(&parts[0]);
    for (int t = 1; t < count; t++) {
        if (started[t])
            pthread_join(ids[t], NULL);
        else
            run_range(&parts[t]);  /* no thread to be had: this one does the part */
    }
}

/* add(out, base, n, start, key, alpha, double, threads): addresses as integers, base 0 for none */
static PyObject *py_add(PyObject *self, PyObject *args) {
    unsigned long long out, base, start, key;
    Py_ssize_t n;
    double alpha;
    int is_double, threads;
    if (!PyArg_ParseTuple(args, "KKnKKdpi", &out, &base, &n, &start, &key, &alpha, &is_double,
                          &threads))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n must not be negative");
        return NULL;
    }
    Range whole = {(char *)(uintptr_t)out, (const char *)(uintptr_t)base, (int64_t)n, start, key,
                   alpha, is_double};
    Py_BEGIN_ALLOW_THREADS
    run_split(whole, threads);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* word(key, j), for tests of the stream */
static PyObject *py_word(PyObject *self, PyObject *args) {
    unsigned long long key, j;
    if (!PyArg_ParseTuple(args, "KK", &key, &j)) return NULL;
    return PyLong_FromUnsignedLongLong(word_at(key, j));
}

static PyMethodDef methods[] = {
    {"add", py_add, METH_VARARGS, "out[i] = base[i] + alpha * z(start + i) for i < n"},
    {"word", py_word, METH_VARARGS, "the stream's 64-bit word j for key"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_signs", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_signs(void) { return PyModule_Create(&module); }

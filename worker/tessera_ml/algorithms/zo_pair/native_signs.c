/* Rademacher z of zo_pair, added into a tensor in one pass (see signs.py for the stream).
 *
 * Element e of the stream of key k is +1 where bit (e mod 64) of word(k, e / 64) is set and -1
 * where it is not; word(k, j) is the splitmix64 output for the state k + (j + 1) * golden.
 * Each call covers elements [start, start + n) and writes out[i] = base[i] + alpha * z(start + i)
 * (or alpha * z(start + i) where no base is given), eight elements per byte of a word through a
 * table of the 256 sign patterns times alpha. out may be base. One thread: splitting a range over
 * two made a two-thread MeZO step slower, not faster, on a 2-core machine. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
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
            T sum[8]; /* all loads before any store: out may be base, and this vectorises */   \
            if (base) {                                                                        \
                for (int k = 0; k < 8; k++) sum[k] = base[i + k] + t[k];                       \
            } else {                                                                           \
                for (int k = 0; k < 8; k++) sum[k] = t[k];                                     \
            }                                                                                  \
            for (int k = 0; k < 8; k++) out[i + k] = sum[k];                                   \
        }                                                                                      \
        for (; i < n; i++) {                                                                   \
            T s = bit_at(key, start + (uint64_t)i) ? alpha : -alpha;                           \
            out[i] = base ? base[i] + s : s;                                                   \
        }                                                                                      \
    }

DEFINE_ADD(add_f32, float)
DEFINE_ADD(add_f64, double)

/* add(out, base, n, start, key, alpha, double): addresses as integers, base 0 for none */
static PyObject *py_add(PyObject *self, PyObject *args) {
    unsigned long long out, base, start, key;
    Py_ssize_t n;
    double alpha;
    int is_double;
    if (!PyArg_ParseTuple(args, "KKnKKdp", &out, &base, &n, &start, &key, &alpha, &is_double))
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "n must not be negative");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (is_double)
        add_f64((double *)(uintptr_t)out, (const double *)(uintptr_t)base, (int64_t)n, start,
                key, alpha);
    else
        add_f32((float *)(uintptr_t)out, (const float *)(uintptr_t)base, (int64_t)n, start, key,
                (float)alpha);
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

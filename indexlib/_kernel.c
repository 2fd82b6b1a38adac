/*
 * indexlib._kernel: the compiled inner loop of indexlib.records.scan_buffer.
 *
 * walk_v2(buffer, pos, end) -> (positions: bytes of native int64, pos)
 *   Accepts, from byte `pos` on, every batch of the common case only: a magic-2 batch whose whole
 *   61-byte header lies before `end`, whose size field is >= 49, that fits before `end`, and whose
 *   CRC-32C (over bytes 21.. of the batch) matches the stored one. It stops at the first batch that is
 *   anything else and returns where it stopped; the Python general step applies all of Kafka's rules
 *   to that batch, exactly as after records.py's own fast loop. No byte at or after `end` is read.
 *
 * crc32c(buffer, crc=0) -> int   CRC-32C (Castagnoli), for tests and callers.
 * hardware() -> bool             whether the CPU's CRC-32C instruction is used.
 *
 * CRC-32C uses SSE4.2 on x86-64 and the CRC extension on aarch64 when the CPU has them (checked at run
 * time), else a slicing-by-8 table. The GIL is released during a walk.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define KERNEL_X86 1
#elif defined(__aarch64__)
#include <arm_acle.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif
#define KERNEL_ARM 1
#endif

#define LOG_OVERHEAD 12
#define V2_HEADER_SIZE 61
#define CRC_START 21

/* ------------------------------------------------------------------------------------ CRC-32C */
static uint32_t crc_table[8][256];
static int use_hardware = 0;

static void init_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap64(v);
#endif
        v ^= crc;
        crc = crc_table[7][v & 0xFF] ^ crc_table[6][(v >> 8) & 0xFF] ^ crc_table[5][(v >> 16) & 0xFF] ^
              crc_table[4][(v >> 24) & 0xFF] ^ crc_table[3][(v >> 32) & 0xFF] ^ crc_table[2][(v >> 40) & 0xFF] ^
              crc_table[1][(v >> 48) & 0xFF] ^ crc_table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

#if defined(KERNEL_X86)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
#elif defined(KERNEL_ARM)
__attribute__((target("+crc"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __crc32cd(c, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __crc32cb(c, *p++);
    return ~c;
}
#endif

static inline uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n) {
#if defined(KERNEL_X86) || defined(KERNEL_ARM)
    if (use_hardware)
        return crc32c_hw(crc, p, n);
#endif
    return crc32c_table(crc, p, n);
}

static int detect_hardware(void) {
#if defined(KERNEL_X86)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
#elif defined(KERNEL_ARM) && defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#elif defined(KERNEL_ARM) && defined(__APPLE__)
    return 1; /* every Apple arm64 CPU has the CRC extension */
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------------------ the walk */
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static PyObject *walk_v2(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &end))
        return NULL;
    if (pos < 0 || end < pos || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk_v2: need 0 <= pos <= end <= len(buffer)");
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)view.buf;
    Py_ssize_t capacity = 1024, count = 0;
    int64_t *out = PyMem_RawMalloc(capacity * sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS;
    while (pos <= end - V2_HEADER_SIZE) {
        const uint8_t *batch = data + pos;
        int32_t length = (int32_t)be32(batch + 8);
        if (batch[16] != 2 || length < V2_HEADER_SIZE - LOG_OVERHEAD)
            break;
        if ((Py_ssize_t)length > end - pos - LOG_OVERHEAD) /* never overflows: compared before adding */
            break;
        Py_ssize_t batch_end = pos + LOG_OVERHEAD + (Py_ssize_t)length;
        if (crc32c(0, batch + CRC_START, (size_t)(batch_end - pos - CRC_START)) != be32(batch + 17))
            break;
        if (count == capacity) {
            Py_ssize_t grown = capacity * 2;
            int64_t *bigger = PyMem_RawRealloc(out, grown * sizeof(int64_t));
            if (bigger == NULL) {
                failed = 1;
                break;
            }
            out = bigger;
            capacity = grown;
        }
        out[count++] = (int64_t)pos;
        pos = batch_end;
    }
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    if (failed) {
        PyMem_RawFree(out);
        return PyErr_NoMemory();
    }
    PyObject *positions = PyBytes_FromStringAndSize((const char *)out, count * (Py_ssize_t)sizeof(int64_t));
    PyMem_RawFree(out);
    if (positions == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", positions, pos);
}

static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &view, &crc))
        return NULL;
    uint32_t value;
    Py_BEGIN_ALLOW_THREADS;
    value = crc32c(crc, (const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(value);
}

static PyObject *py_crc32c_table(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &view, &crc))
        return NULL;
    uint32_t value = crc32c_table(crc, (const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(value);
}

static PyObject *py_hardware(PyObject *self, PyObject *unused) { return PyBool_FromLong(use_hardware); }

static PyMethodDef methods[] = {
    {"walk_v2", walk_v2, METH_VARARGS, "walk_v2(buffer, pos, end) -> (positions: bytes of int64, pos)"},
    {"crc32c", py_crc32c, METH_VARARGS, "crc32c(buffer, crc=0) -> CRC-32C (hardware when available)"},
    {"crc32c_table", py_crc32c_table, METH_VARARGS, "crc32c_table(buffer, crc=0) -> CRC-32C (table only)"},
    {"hardware", py_hardware, METH_NOARGS, "whether the CPU's CRC-32C instruction is used"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "indexlib._kernel", "The compiled inner loop of indexlib.records.scan_buffer.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    init_table();
    use_hardware = detect_hardware();
    return PyModule_Create(&module);
}

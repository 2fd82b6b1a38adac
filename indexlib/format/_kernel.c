/*
 * indexlib.format._kernel: the compiled inner loop of indexlib.format.batch_walk.scan_buffer.
 *
 * walk_v2(buffer, pos, end) -> (positions: bytes of native int64, pos)
 *   Accepts, from byte `pos` on, every batch of the common case only: a magic-2 batch whose whole
 *   61-byte header lies before `end`, whose size field is >= 49, that fits before `end`, and whose
 *   CRC-32C (over bytes 21.. of the batch) matches the stored one. It stops at the first batch that is
 *   anything else and returns where it stopped; the Python general step applies all of Kafka's rules
 *   to that batch, exactly as after batch_walk.py's own fast loop. No byte at or after `end` is read.
 *
 * scan_segment(fd, end, base_offset, index_interval_bytes, offset_probes, time_probes, marker_parser,
 *              window=1 << 20, prefetch=True) -> dict
 *   The streaming walk: one pass over a .log through a reused pread buffer (never mmap: a file that
 *   shrinks under us is an OSError, not SIGBUS), with Kafka's iteration rules exactly as
 *   batch_walk.scan_buffer + control_records.check_markers apply them, and the per-batch parts of
 *   rebuild.plan_segment (selected index rows, running time-index values, compacted producer events)
 *   and the position / offset lookups verify needs. Nothing is kept per batch. A file longer than two
 *   windows is read ahead by a thread of its own (prefetch=False: not). See scan_segment below.
 *
 * crc32c(buffer, crc=0) -> int   CRC-32C (Castagnoli), for tests and callers.
 * crc32c_interleaved(buffer, crc=0) -> int   the same through the 3-stream path scan_segment uses.
 * hardware() -> bool             whether the CPU's CRC-32C instruction is used.
 *
 * CRC-32C (_crc32c.h) uses SSE4.2 on x86-64 and the CRC extension on aarch64 when the CPU has them and they
 * agree with the table at module init, else a slicing-by-8 table. The GIL is released during a walk.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "_crc32c.h"

#define LOG_OVERHEAD 12
#define V2_HEADER_SIZE 61
#define CRC_START 21

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

/* ------------------------------------------------------------------------ scan_segment */
/*
 * scan_segment(fd, end, base_offset, index_interval_bytes, offset_probes, time_probes, marker_parser,
 *              window=1 << 20, prefetch=True) -> dict
 *
 * One pass over bytes [0, end) of the file `fd` (pread only, never at or past `end`) through a buffer of
 * `window` bytes, reused (with a second one the prefetch thread reads the next window into: see the reader):
 * a batch header (61 bytes, or what is left before `end`) is always made contiguous by moving the unread rest
 * to the front and refilling; a longer batch has its CRC computed over successive
 * reads. Only a control batch whose marker is parsed is held whole (the buffer grows to it). The walk rules
 * are batch_walk.scan_buffer's; the marker rules are control_records.check_markers'; the running values and the index
 * selection are rebuild.plan_segment's; the events are rebuild.transaction_events + compact_events. The GIL
 * is released except while `marker_parser` runs.
 *
 * Returns {batch_count, valid_bytes, walked, stop, problem, fatal, plan_end, entries, last_row, stop_row,
 * events, offset_answers, time_answers, last_offset, raw_max, epoch_starts, producers} (see _kernel.pyi).
 * marker_parser(batch, records_count) returns why the marker is malformed (a str), or its control type (an int),
 * or (control type, coordinator epoch, record timestamp), or (why,) (a 1-tuple of a str) when the batch is
 * compressed and cannot be read (its codec's package is missing, or it does not decompress): the fatal
 * F_COMPRESSED_CONTROL, with `why` as its text. A control batch compressed with a known codec (1-4) is handed to
 * the parser as any other, which decompresses it: this file never decompresses. producers is None when some
 * marker's answer was a bare int (its coordinator epoch and timestamp unknown). Memory: the selected rows, one event per producer and
 * transaction, one item per leader epoch and per producer; nothing per batch.
 */
#define HEADER_UP_TO_MAGIC 17
#define MIN_SIZE_FIELD 14
#define ROW_WORDS 7
#define EVENT_SIZE 29

enum { STOP_END = 0, STOP_SHORT_TAIL = 1, STOP_INCOMPLETE_BATCH = 2, STOP_CORRUPT_BATCH = 3, STOP_INVALID_RECORD = 4 };
enum {
    P_SIZE = 1,
    P_V2_SIZE = 2,
    P_TRUNCATED = 3,
    P_CRC_V2 = 4,
    P_CRC_LEGACY = 5,
    P_INVALID_MARKER = 6,
    F_COMPRESSED_CONTROL = 7,
    F_UNKNOWN_CONTROL_TYPE = 8,
};

static inline int64_t be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return (int64_t)v;
}

static inline int32_t be32s(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
#if __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return (int32_t)v;
}

/* int64 arithmetic that wraps like numpy's (no undefined behaviour on overflow) */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

/*
 * The reader: the file's bytes [bpos, bpos + blen) are held at `buf`, with `bpos` a multiple of READ_ALIGN and
 * `buf - bpos` one too, so every pread copies from a page-cache page into a destination at the same offset
 * modulo READ_ALIGN. A destination a few bytes past its source (malloc's 16-byte offset) made the kernel's
 * copy about 4x slower on the x86-64 machines measured (benchmarks/RESULTS.md).
 *
 * Prefetch (files longer than two windows): a thread of the reader's own preads the next window (the bytes
 * from where the held ones end) into a second buffer while the walk works on the first; a refill then copies
 * the unread rest of a header (< PREFIX bytes) in front of the prefetched window and swaps the buffers, so the
 * page-cache copy runs beside the walk and the CRC. Anything else (a marker batch held whole, a window too
 * small for a header, a failed or short prefetch) drains the thread and refills synchronously, as without it.
 * The thread only ever preads into the spare buffer; it has every signal blocked; it is joined, without the
 * GIL, when the walk ends. A marker_parser that forks would leave a child whose walk waits for a thread it does
 * not have (the project's parser never forks).
 */
#define READ_ALIGN 64
#define PREFIX 128 /* >= the unread rest of a header (< 61) plus the alignment (< READ_ALIGN), rounded */
#include <pthread.h>
#include <signal.h>

enum { PF_IDLE = 0, PF_REQUESTED = 1, PF_DONE = 2, PF_QUIT = 3 };

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int fd;
    int state;       /* PF_*, under mu */
    uint8_t *target; /* the request: pread [at, at + want) to target */
    int64_t at;
    size_t want;
    size_t got;      /* the answer: bytes read, and errno (or -1: the file ended first) */
    int err;
} prefetch_t;

typedef struct {
    uint8_t *raw;  /* the allocation */
    uint8_t *base; /* raw rounded up to READ_ALIGN; PREFIX + size usable bytes */
    size_t size;
} rbuf_t;

typedef struct {
    int fd;
    PyObject *source; /* NULL: read `fd`; else an object whose pread_into(buffer, offset) reads (see source_pread) */
    PyObject *source_error; /* the exception a source raised (err == ERR_SOURCE), kept until the walk ends */
    int64_t end;     /* never read at or past it */
    size_t window;   /* bytes a refill reads */
    rbuf_t cur;      /* holds the bytes below */
    uint8_t *buf;    /* buf[0] is the file's byte bpos; within cur */
    int64_t bpos;    /* a multiple of READ_ALIGN */
    size_t blen;     /* bytes of the file held in buf */
    int err;         /* errno of a failed pread; -1: the file ended before `end`; ERR_SOURCE: the source raised */
    int nomem;
    prefetch_t *pf;  /* NULL: no prefetch thread */
    rbuf_t spare;    /* the prefetch thread's target */
    int64_t pf_at;   /* the file position of the window requested into spare, or -1 */
} reader_t;

static int rbuf_alloc(rbuf_t *b, size_t size) {
    uint8_t *raw = PyMem_RawMalloc(PREFIX + size + READ_ALIGN);
    if (raw == NULL)
        return -1;
    b->raw = raw;
    b->base = (uint8_t *)(((uintptr_t)raw + READ_ALIGN - 1) & ~(uintptr_t)(READ_ALIGN - 1));
    b->size = size;
    return 0;
}

static size_t full_pread(int fd, uint8_t *to, size_t want, int64_t at, int *err) {
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, to + got, want - got, (off_t)(at + (int64_t)got));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            *err = errno;
            break;
        }
        if (n == 0) {
            *err = -1;
            break;
        }
        got += (size_t)n;
    }
    return got;
}

#define ERR_SOURCE (-2)

/*
 * A read of [at, at + want) from a Python source (an object store's reader): `source.pread_into(buffer, offset)`
 * fills a writable memoryview over our buffer from `offset` and returns how many bytes it wrote (0: the object
 * ended). Called without the GIL (the walk's), it takes the GIL for the call. The memoryview is released after
 * each call, so a source that keeps it cannot write through it later (as with readinto, a source must not keep
 * views derived from it: the buffer is reused). An exception (or a count out of range) ends the read
 * with *err = ERR_SOURCE and the exception kept in *error, to be raised when the walk ends.
 */
static size_t source_pread(PyObject *source, uint8_t *to, size_t want, int64_t at, int *err, PyObject **error) {
    PyGILState_STATE gil = PyGILState_Ensure();
    size_t got = 0;
    while (got < want) {
        PyObject *view = PyMemoryView_FromMemory((char *)(to + got), (Py_ssize_t)(want - got), PyBUF_WRITE);
        if (view == NULL) {
            *err = ERR_SOURCE;
            break;
        }
        PyObject *n = PyObject_CallMethod(source, "pread_into", "OL", view, (long long)(at + (int64_t)got));
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback); /* the call's own exception, if any, while the view is released */
        PyObject *released = PyObject_CallMethod(view, "release", NULL);
        Py_DECREF(view);
        if (released != NULL) {
            Py_DECREF(released);
        } else if (type != NULL) {
            PyErr_Clear(); /* the call's exception is the one to report */
        } else { /* the source kept an export of the buffer: it must not outlive this call */
            Py_CLEAR(n);
            PyErr_Fetch(&type, &value, &traceback);
        }
        PyErr_Restore(type, value, traceback);
        if (n == NULL) {
            *err = ERR_SOURCE;
            break;
        }
        long long k = PyLong_AsLongLong(n);
        Py_DECREF(n);
        if (k == -1 && PyErr_Occurred()) {
            *err = ERR_SOURCE;
            break;
        }
        if (k < 0 || (unsigned long long)k > (unsigned long long)(want - got)) {
            PyErr_Format(PyExc_ValueError, "scan_segment: pread_into returned %lld for a buffer of %zu bytes", k,
                         want - got);
            *err = ERR_SOURCE;
            break;
        }
        if (k == 0) {
            *err = -1;
            break;
        }
        got += (size_t)k;
    }
    if (*err == ERR_SOURCE) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (traceback != NULL && value != NULL)
            PyException_SetTraceback(value, traceback);
        Py_XDECREF(*error);
        *error = value;
        Py_XDECREF(type);
        Py_XDECREF(traceback);
    }
    PyGILState_Release(gil);
    return got;
}

static void *prefetch_main(void *arg) {
    prefetch_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->state != PF_REQUESTED && p->state != PF_QUIT)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->state == PF_QUIT)
            break;
        uint8_t *target = p->target;
        int64_t at = p->at;
        size_t want = p->want;
        pthread_mutex_unlock(&p->mu);
        int err = 0;
        size_t got = full_pread(p->fd, target, want, at, &err);
        pthread_mutex_lock(&p->mu);
        p->got = got;
        p->err = err;
        if (p->state == PF_REQUESTED)
            p->state = PF_DONE;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Ask the thread for the window from where the held bytes end (nothing when the file is all held). */
static void prefetch_request(reader_t *r) {
    int64_t at = r->bpos + (int64_t)r->blen;
    if (r->pf == NULL || at >= r->end)
        return;
    prefetch_t *p = r->pf;
    pthread_mutex_lock(&p->mu);
    p->target = r->spare.base + PREFIX;
    p->at = at;
    p->want = (int64_t)r->window < r->end - at ? r->window : (size_t)(r->end - at);
    p->state = PF_REQUESTED;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    r->pf_at = at;
}

/* Wait for the window in flight; its bytes read and error. */
static size_t prefetch_wait(reader_t *r, int *err) {
    prefetch_t *p = r->pf;
    pthread_mutex_lock(&p->mu);
    while (p->state == PF_REQUESTED)
        pthread_cond_wait(&p->cv, &p->mu);
    size_t got = p->got;
    *err = p->err;
    p->state = PF_IDLE;
    pthread_mutex_unlock(&p->mu);
    r->pf_at = -1;
    return got;
}

static void prefetch_start(reader_t *r) {
    prefetch_t *p = PyMem_RawMalloc(sizeof *p);
    if (p == NULL || rbuf_alloc(&r->spare, r->window) < 0) {
        PyMem_RawFree(p);
        return; /* no prefetch: the walk reads synchronously */
    }
    memset(p, 0, sizeof *p);
    p->fd = r->fd;
    int ok = pthread_mutex_init(&p->mu, NULL) == 0;
    if (ok && pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        ok = 0;
    }
    if (ok) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        ok = pthread_create(&p->thread, NULL, prefetch_main, p) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!ok) {
            pthread_cond_destroy(&p->cv);
            pthread_mutex_destroy(&p->mu);
        }
    }
    if (!ok) {
        PyMem_RawFree(p);
        PyMem_RawFree(r->spare.raw);
        r->spare.raw = NULL;
        return;
    }
    r->pf = p;
    prefetch_request(r);
}

static int reader_init(reader_t *r, int fd, int64_t end, size_t window) {
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->end = end;
    r->window = window;
    r->pf_at = -1;
    if (rbuf_alloc(&r->cur, window) < 0)
        return -1;
    r->buf = r->cur.base;
    return 0;
}

/* Stop the read-ahead thread (the walk is over): called without the GIL, since a pread in flight may take a
 * while on a slow mount. */
static void prefetch_stop(reader_t *r) {
    if (r->pf == NULL)
        return;
    prefetch_t *p = r->pf;
    pthread_mutex_lock(&p->mu);
    p->state = PF_QUIT;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    PyMem_RawFree(p);
    r->pf = NULL;
    r->pf_at = -1;
}

static void reader_free(reader_t *r) {
    prefetch_stop(r);
    Py_CLEAR(r->source_error); /* with the GIL: reader_free runs after the walk */
    PyMem_RawFree(r->spare.raw);
    PyMem_RawFree(r->cur.raw);
    r->spare.raw = r->cur.raw = NULL;
    r->buf = NULL;
}

/* Make the file's bytes [pos, pos + need) contiguous in the buffer (need <= end - pos; pos >= r->bpos). */
static int reader_fill(reader_t *r, int64_t pos, size_t need) {
    int64_t held_end = r->bpos + (int64_t)r->blen;
    if (pos + (int64_t)need <= held_end)
        return 0;
    const int64_t from = pos & ~(int64_t)(READ_ALIGN - 1); /* >= r->bpos: both are multiples of READ_ALIGN */
    if (r->pf_at >= 0) {
        const int64_t at = r->pf_at;
        const size_t keep = from < held_end ? (size_t)(held_end - from) : 0;
        int err = 0;
        size_t got = prefetch_wait(r, &err);
        if (at == held_end && keep <= PREFIX && err == 0) { /* the common case: swap the windows */
            rbuf_t old = r->cur;
            uint8_t *front = r->spare.base + PREFIX - keep;
            if (keep)
                memcpy(front, r->buf + (from - r->bpos), keep);
            r->cur = r->spare;
            r->spare = old;
            r->buf = front;
            r->bpos = from;
            r->blen = keep + got;
            prefetch_request(r);
            if (pos + (int64_t)need <= r->bpos + (int64_t)r->blen)
                return 0;
            if (r->pf_at >= 0) /* a window too small for this header: read it synchronously */
                prefetch_wait(r, &err);
            held_end = r->bpos + (int64_t)r->blen;
        }
        /* else the prefetched bytes are dropped: the synchronous read below reads (or fails on) them again */
    }
    size_t keep = 0;
    if (from < held_end) {
        keep = (size_t)(held_end - from);
        memmove(r->cur.base, r->buf + (from - r->bpos), keep);
    }
    r->buf = r->cur.base;
    r->bpos = from;
    r->blen = keep;
    need += (size_t)(pos - from);
    if (need > PREFIX + r->cur.size) { /* only a marker batch is ever held whole */
        rbuf_t bigger;
        if (rbuf_alloc(&bigger, need) < 0) {
            r->nomem = 1;
            return -1;
        }
        memcpy(bigger.base, r->cur.base, keep);
        PyMem_RawFree(r->cur.raw);
        r->cur = bigger;
        r->buf = bigger.base;
    }
    int64_t at = r->bpos + (int64_t)r->blen;
    size_t want = PREFIX + r->cur.size - r->blen;
    if ((int64_t)want > r->end - at)
        want = (size_t)(r->end - at);
    else if (((at + (int64_t)want) & (READ_ALIGN - 1)) <= (int64_t)(r->blen + want - need))
        want -= (size_t)((at + (int64_t)want) & (READ_ALIGN - 1)); /* end on READ_ALIGN: the next read starts on it */
    int err = 0;
    if (r->source != NULL)
        r->blen += source_pread(r->source, r->buf + r->blen, want, at, &err, &r->source_error);
    else
        r->blen += full_pread(r->fd, r->buf + r->blen, want, at, &err);
    if (r->blen < need) {
        r->err = err ? err : -1;
        return -1;
    }
    if (r->pf != NULL)
        prefetch_request(r);
    return 0;
}

/* CRC of the file's bytes [from, to), from whatever part of them is held and then successive reads. */
static int crc_stream(reader_t *r, int legacy, int64_t from, int64_t to, uint32_t *out) {
    uint32_t c = 0;
    while (from < to) {
        int64_t held_end = r->bpos + (int64_t)r->blen;
        if (from >= held_end) {
            int64_t left = to - from;
            if (reader_fill(r, from, (size_t)(left < (int64_t)r->window ? left : (int64_t)r->window)) < 0)
                return -1;
            held_end = r->bpos + (int64_t)r->blen;
        }
        const uint8_t *p = r->buf + (from - r->bpos);
        int64_t stop = to < held_end ? to : held_end;
        size_t n = (size_t)(stop - from);
        c = legacy ? crc32_ieee(c, p, n) : crc32c_fast(c, p, n);
        from = stop;
    }
    *out = c;
    return 0;
}

/* producer id -> kind of its last event in the segment, and the index of its state in pstates_t (-1: none yet)
 * (open addressing; empty slot: key -1) */
typedef struct {
    int64_t *keys;
    int8_t *kinds;
    int32_t *states;
    size_t mask; /* capacity - 1 */
    size_t used;
} pidmap_t;

static void pidmap_free(pidmap_t *m) {
    PyMem_RawFree(m->keys);
    PyMem_RawFree(m->kinds);
    PyMem_RawFree(m->states);
    m->keys = NULL;
    m->kinds = NULL;
    m->states = NULL;
}

static int pidmap_init(pidmap_t *m, size_t capacity) {
    m->keys = PyMem_RawMalloc(capacity * sizeof(int64_t));
    m->kinds = PyMem_RawMalloc(capacity);
    m->states = PyMem_RawMalloc(capacity * sizeof(int32_t));
    if (m->keys == NULL || m->kinds == NULL || m->states == NULL)
        return -1;
    memset(m->keys, 0xFF, capacity * sizeof(int64_t));
    m->mask = capacity - 1;
    m->used = 0;
    return 0;
}

static inline size_t pid_hash(int64_t pid, size_t mask) {
    uint64_t h = (uint64_t)pid * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* The slot of `pid` (inserted with kind -1 when new), or -1 when out of memory. */
static Py_ssize_t pidmap_slot(pidmap_t *m, int64_t pid) {
    size_t i = pid_hash(pid, m->mask);
    while (m->keys[i] != pid) {
        if (m->keys[i] == -1) {
            if (2 * (m->used + 1) > m->mask + 1) { /* keep the load at most 1/2 */
                size_t capacity = 2 * (m->mask + 1);
                pidmap_t grown;
                if (pidmap_init(&grown, capacity) < 0) {
                    pidmap_free(&grown);
                    return -1;
                }
                for (size_t j = 0; j <= m->mask; j++) {
                    if (m->keys[j] == -1)
                        continue;
                    size_t k = pid_hash(m->keys[j], grown.mask);
                    while (grown.keys[k] != -1)
                        k = (k + 1) & grown.mask;
                    grown.keys[k] = m->keys[j];
                    grown.kinds[k] = m->kinds[j];
                    grown.states[k] = m->states[j];
                }
                grown.used = m->used;
                pidmap_free(m);
                *m = grown;
                return pidmap_slot(m, pid);
            }
            m->keys[i] = pid;
            m->kinds[i] = -1;
            m->states[i] = -1;
            m->used++;
            return (Py_ssize_t)i;
        }
        i = (i + 1) & m->mask;
    }
    return (Py_ssize_t)i;
}

/* a growable byte array */
typedef struct {
    char *data;
    size_t len, cap;
} bytes_t;

static int bytes_reserve(bytes_t *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more)
        cap *= 2;
    char *bigger = PyMem_RawRealloc(b->data, cap);
    if (bigger == NULL)
        return -1;
    b->data = bigger;
    b->cap = cap;
    return 0;
}

/* Append one plan row (ROW_WORDS int64) to the selected entries; -1 without memory. */
static inline int append_row(bytes_t *entries, const int64_t *row) {
    if (bytes_reserve(entries, ROW_WORDS * sizeof(int64_t)) < 0)
        return -1;
    memcpy(entries->data + entries->len, row, ROW_WORDS * sizeof(int64_t));
    entries->len += ROW_WORDS * sizeof(int64_t);
    return 0;
}

/* Batch i's producer event (kind 0 idempotent data, 1 transactional data, 2 ABORT, 3 COMMIT), kept unless it
 * is data of the kind the producer's last event already was (rebuild.compact_events); the producer's slot in
 * `pids`, or -1 without memory. */
static inline Py_ssize_t producer_event(pidmap_t *pids, bytes_t *events, int64_t i, int8_t kind, int64_t producer_id,
                                        int64_t base_offset, int64_t position) {
    Py_ssize_t slot = pidmap_slot(pids, producer_id);
    if (slot < 0)
        return -1;
    int8_t previous = pids->kinds[slot];
    pids->kinds[slot] = kind;
    if (kind <= 1 && previous == kind)
        return slot;
    if (bytes_reserve(events, EVENT_SIZE) < 0)
        return -1;
    char *e = events->data + events->len;
    int32_t batch32 = (int32_t)i;
    memcpy(e, &batch32, 4);
    memcpy(e + 4, &kind, 1);
    memcpy(e + 5, &producer_id, 8);
    memcpy(e + 13, &base_offset, 8);
    memcpy(e + 21, &position, 8);
    events->len += EVENT_SIZE;
    return slot;
}

/* A producer's state at the segment's end as its own batches decide it: log_scan.PRODUCER_DTYPE, whose rules are
 * log_scan.producer_end_states' (Kafka's ProducerAppendInfo / ProducerStateEntry with origin REPLICATION). */
enum { META_INHERIT = 0, META_CLEARED = 1, META_SET = 2 };
#define PRODUCER_SIZE 50 /* PRODUCER_DTYPE, packed */

typedef struct {
    int64_t producer_id, last_offset, timestamp, txn_first_offset;
    int32_t base_sequence, offset_delta, coordinator_epoch; /* the last data batch's; last sequence made at the end */
    int16_t first_epoch, epoch;
    int8_t meta, has_marker;
} pstate_t;

typedef struct {
    pstate_t *items; /* in the order of each producer's first batch */
    size_t len, cap;
} pstates_t;

/* The state of the producer at `slot` of `pids`, created (from its first batch's `epoch`) when it has none;
 * NULL without memory. */
static pstate_t *producer_state(pidmap_t *pids, pstates_t *states, Py_ssize_t slot, int16_t epoch) {
    int32_t k = pids->states[slot];
    if (k >= 0)
        return &states->items[k];
    if (states->len == states->cap) {
        size_t cap = states->cap ? 2 * states->cap : 16;
        if (cap > (size_t)INT32_MAX)
            return NULL;
        pstate_t *bigger = PyMem_RawRealloc(states->items, cap * sizeof(pstate_t));
        if (bigger == NULL)
            return NULL;
        states->items = bigger;
        states->cap = cap;
    }
    pstate_t *s = &states->items[states->len];
    *s = (pstate_t){.producer_id = pids->keys[slot], .last_offset = -1, .timestamp = -1, .txn_first_offset = -1,
                    .base_sequence = -1, .offset_delta = 0, .coordinator_epoch = -1, .first_epoch = epoch,
                    .epoch = epoch, .meta = META_INHERIT, .has_marker = 0};
    pids->states[slot] = (int32_t)states->len++;
    return s;
}

/* Kafka's DefaultRecordBatch.incrementSequence in Java's wrapping int arithmetic. */
static inline int32_t increment_sequence(int32_t sequence, int32_t increment) {
    int32_t room = (int32_t)((uint32_t)INT32_MAX - (uint32_t)increment);
    if (sequence > room)
        return (int32_t)((uint32_t)increment - ((uint32_t)INT32_MAX - (uint32_t)sequence) - 1u);
    return (int32_t)((uint32_t)sequence + (uint32_t)increment);
}

/* A data batch of the producer: ProducerAppendInfo.appendDataBatch (delta: the batch's lastOffsetDelta). */
static inline void producer_data(pstate_t *s, int16_t epoch, int32_t base_sequence, int32_t delta, int64_t base,
                                 int64_t last, int64_t max_ts, int attributes) {
    s->epoch = epoch;
    s->meta = META_SET;
    s->base_sequence = base_sequence;
    s->last_offset = last;
    s->offset_delta = delta;
    s->timestamp = max_ts;
    if ((attributes & 0x10) && s->txn_first_offset == -1)
        s->txn_first_offset = base;
}

/* An ABORT/COMMIT marker of the producer: ProducerAppendInfo.appendEndTxnMarker. */
static inline void producer_marker(pstate_t *s, int16_t epoch, int32_t coordinator_epoch, int64_t timestamp) {
    if (epoch != s->epoch) { /* maybeUpdateProducerEpoch: the BatchMetadata goes */
        s->meta = META_CLEARED;
        s->base_sequence = -1;
        s->last_offset = -1;
        s->offset_delta = 0;
    }
    s->epoch = epoch;
    s->has_marker = 1;
    s->coordinator_epoch = coordinator_epoch;
    s->timestamp = timestamp;
    s->txn_first_offset = -1;
}

/* The states, packed as PRODUCER_DTYPE. */
static PyObject *producers_bytes(const pstates_t *states) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(states->len * PRODUCER_SIZE));
    if (out == NULL)
        return NULL;
    char *p = PyBytes_AS_STRING(out);
    for (size_t k = 0; k < states->len; k++, p += PRODUCER_SIZE) {
        const pstate_t *s = &states->items[k];
        const int32_t last_sequence =
            s->base_sequence == -1 ? -1 : increment_sequence(s->base_sequence, s->offset_delta); /* lastSequence() */
        memcpy(p, &s->producer_id, 8);
        memcpy(p + 8, &s->first_epoch, 2);
        memcpy(p + 10, &s->epoch, 2);
        memcpy(p + 12, &s->meta, 1);
        memcpy(p + 13, &s->has_marker, 1);
        memcpy(p + 14, &last_sequence, 4);
        memcpy(p + 18, &s->last_offset, 8);
        memcpy(p + 26, &s->offset_delta, 4);
        memcpy(p + 30, &s->timestamp, 8);
        memcpy(p + 38, &s->coordinator_epoch, 4);
        memcpy(p + 42, &s->txn_first_offset, 8);
    }
    return out;
}

/* A leader epoch's first batch (log_scan.EPOCH_DTYPE, packed: int32 epoch, int64 offset); -1 without memory. */
#define EPOCH_SIZE 12
static inline int epoch_start(bytes_t *epochs, int32_t epoch, int64_t base_offset) {
    if (bytes_reserve(epochs, EPOCH_SIZE) < 0)
        return -1;
    memcpy(epochs->data + epochs->len, &epoch, 4);
    memcpy(epochs->data + epochs->len + 4, &base_offset, 8);
    epochs->len += EPOCH_SIZE;
    return 0;
}

/* What the walk knows of the batches kept so far (a kept batch: accepted, and the walk not frozen). */
typedef struct {
    int64_t n;                       /* batches kept: the last kept batch's number + 1 */
    int64_t valid_bytes;             /* where the last kept batch ends */
    int64_t last_offset, prev_last;  /* the last kept batch's last offset, and the one before it */
    int64_t running_max, max_offset; /* the largest max timestamp (-1 at least), and its batch's last offset */
    int64_t raw_max;                 /* the largest max timestamp, INT64_MIN before any batch */
    int64_t v2_next;                 /* the last kept v2 batch's last offset + 1 */
    int64_t top_last;                /* the largest last offset */
} kept_t;

/* Batch number `i`, ending at `batch_end` with last offset `batch_last` and max timestamp `max_ts`, is kept: the
 * same update in the fast loop and the general step of scan_segment. */
static inline void keep_batch(kept_t *k, int64_t i, int64_t batch_end, int64_t batch_last, int64_t max_ts,
                              int is_v2) {
    k->n = i + 1;
    k->valid_bytes = batch_end;
    k->prev_last = k->last_offset;
    k->last_offset = batch_last;
    if (max_ts > k->running_max) {
        k->running_max = max_ts;
        k->max_offset = batch_last;
    }
    if (max_ts > k->raw_max)
        k->raw_max = max_ts;
    if (is_v2)
        k->v2_next = wrap_add(batch_last, 1);
    if (batch_last > k->top_last)
        k->top_last = batch_last;
}

typedef struct {
    int set;
    int code;
    int64_t position, batch_index, base_offset, a, b;
    PyObject *text; /* owned: P_INVALID_MARKER's reason, or why F_COMPRESSED_CONTROL's batch cannot be read */
} problem_t;

static PyObject *problem_tuple(const problem_t *p) {
    if (!p->set)
        Py_RETURN_NONE;
    return Py_BuildValue("(iLLLLLO)", p->code, (long long)p->position, (long long)p->batch_index,
                         (long long)p->base_offset, (long long)p->a, (long long)p->b,
                         p->text != NULL ? p->text : Py_None);
}

static PyObject *row_tuple(const int64_t *row) {
    return Py_BuildValue("(LLLLLLL)", (long long)row[0], (long long)row[1], (long long)row[2], (long long)row[3],
                         (long long)row[4], (long long)row[5], (long long)row[6]);
}

static int64_t *copy_probes(const Py_buffer *view, const char *what, Py_ssize_t *count) {
    if (view->len % 8 != 0) {
        PyErr_Format(PyExc_ValueError, "scan_segment: %s must be native int64 (a length multiple of 8)", what);
        return NULL;
    }
    Py_ssize_t n = view->len / 8;
    int64_t *out = PyMem_RawMalloc(n > 0 ? (size_t)n * 8 : 8);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (n > 0)
        memcpy(out, view->buf, (size_t)n * 8);
    for (Py_ssize_t i = 1; i < n; i++)
        if (out[i] < out[i - 1]) {
            PyMem_RawFree(out);
            PyErr_Format(PyExc_ValueError, "scan_segment: %s must be sorted ascending", what);
            return NULL;
        }
    *count = n;
    return out;
}

static PyObject *scan_segment(PyObject *self, PyObject *args) {
    int fd = -1;
    PyObject *from;
    PyObject *source = NULL;
    long long end_arg, base_arg, interval_arg;
    Py_buffer offset_view, time_view;
    PyObject *parser;
    Py_ssize_t window = (Py_ssize_t)1 << 20;
    int prefetch = 1;
    if (!PyArg_ParseTuple(args, "OLLLy*y*O|np:scan_segment", &from, &end_arg, &base_arg, &interval_arg, &offset_view,
                          &time_view, &parser, &window, &prefetch))
        return NULL;
    if (PyLong_Check(from)) {
        long value = PyLong_AsLong(from);
        if (value < INT_MIN || value > INT_MAX) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_OverflowError, "scan_segment: a file descriptor out of range");
            value = -1;
        }
        fd = (int)value;
        if (fd == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&offset_view);
            PyBuffer_Release(&time_view);
            return NULL;
        }
    } else {
        source = from; /* a borrowed reference: the caller's argument outlives the call */
    }
    const int64_t end = (int64_t)end_arg, base_offset = (int64_t)base_arg, interval = (int64_t)interval_arg;

    PyObject *result = NULL;
    int64_t *offset_probes = NULL, *time_probes = NULL, *offset_answers = NULL, *time_answers = NULL;
    Py_ssize_t n_offset_probes = 0, n_time_probes = 0;
    reader_t rd;
    memset(&rd, 0, sizeof rd);
    pidmap_t pids = {NULL, NULL, NULL, 0, 0};
    bytes_t entries = {NULL, 0, 0}, events = {NULL, 0, 0}, epochs = {NULL, 0, 0};
    pstates_t pstates = {NULL, 0, 0};
    int32_t max_epoch = -1; /* the largest partition leader epoch of the plan's v2 batches so far */
    int marker_details = 1; /* every marker's coordinator epoch and timestamp came back from the parser */
    /* the tight loop's last producer: its id (-1: none), the kind of its last event and its state's index; a run of
     * one producer's batches then skips the map (the general step forgets it whenever it sees a producer) */
    int64_t recent_pid = -1;
    int8_t recent_kind = -1;
    int32_t recent_state = -1;
    problem_t problem = {0, 0, 0, 0, 0, 0, 0, NULL}, fatal = {0, 0, 0, 0, 0, 0, 0, NULL};
    int parser_error = 0; /* the parser raised or returned something else (the exception is pending) */

    if (end < 0 || interval < 0 || interval > INT32_MAX || window < 64) {
        PyErr_SetString(PyExc_ValueError,
                        "scan_segment: need end >= 0, 0 <= index_interval_bytes <= 2**31 - 1, window >= 64");
        goto done;
    }
    if (!PyCallable_Check(parser)) {
        PyErr_SetString(PyExc_TypeError, "scan_segment: marker_parser must be callable");
        goto done;
    }
    offset_probes = copy_probes(&offset_view, "offset_probes", &n_offset_probes);
    if (offset_probes == NULL)
        goto done;
    time_probes = copy_probes(&time_view, "time_probes", &n_time_probes);
    if (time_probes == NULL)
        goto done;
    if (source != NULL && !PyObject_HasAttrString(source, "pread_into")) {
        PyErr_SetString(PyExc_TypeError, "scan_segment: the source must be a file descriptor or have pread_into");
        goto done;
    }
    if (source == NULL) {
        struct stat st;
        if (fstat(fd, &st) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
        if (S_ISDIR(st.st_mode)) {
            errno = EISDIR;
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
    }
    offset_answers = PyMem_RawMalloc((size_t)(n_offset_probes ? n_offset_probes : 1) * 3 * sizeof(int64_t));
    time_answers = PyMem_RawMalloc((size_t)(n_time_probes ? n_time_probes : 1) * sizeof(int64_t));
    if (offset_answers == NULL || time_answers == NULL || reader_init(&rd, fd, end, (size_t)window) < 0 ||
        pidmap_init(&pids, 64) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    rd.source = source;
    if (prefetch && source == NULL && end > 2 * (int64_t)window) /* a source reads ahead itself */
        prefetch_start(&rd);
    for (Py_ssize_t q = 0; q < n_offset_probes; q++) {
        offset_answers[3 * q] = -1;
        offset_answers[3 * q + 1] = 0;
        offset_answers[3 * q + 2] = INT64_MIN;
    }
    for (Py_ssize_t q = 0; q < n_time_probes; q++)
        time_answers[q] = INT64_MIN;

    /* the walk */
    int stop = STOP_END, failed = 0, frozen = 0, plan_active = 1;
    int64_t pos = 0, walked = 0, plan_end = 0, last_indexed = 0;
    kept_t k = {.n = 0,
                .valid_bytes = 0,
                .last_offset = INT64_MIN,
                .prev_last = INT64_MIN,
                .running_max = -1,
                .max_offset = base_offset,
                .raw_max = INT64_MIN,
                .v2_next = INT64_MIN,
                .top_last = INT64_MIN};
    int64_t last_row[ROW_WORDS], stop_row[ROW_WORDS];
    int have_last_row = 0, have_stop_row = 0;
    Py_ssize_t next_offset_probe = 0, next_time_probe = 0;
    const int64_t limit = end - HEADER_UP_TO_MAGIC;

    /* Indexed batches start more than `interval` bytes apart, so at most end / (interval + 1) + 1 rows: reserve
     * exactly that when it is small (no doubling overshoot for the common interval); else grow as needed. */
    if (interval > 0) {
        int64_t most = end / (interval + 1) + 1;
        if (most <= ((int64_t)64 << 20) / (ROW_WORDS * 8) && bytes_reserve(&entries, (size_t)most * ROW_WORDS * 8) < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    PyThreadState *thread = PyEval_SaveThread();
    for (;;) {
        /* The common case in a tight loop: a v2 data batch (size >= 49, not a control batch) held whole in the
         * buffer, whose CRC matches, while the plan is active and no probe is due. It does
         * exactly what the general step below does for such a batch, except that the row of the last plan
         * batch is written once, when the loop ends. Anything else ends it: the general step takes that
         * batch (checking it again from the start). */
        if (plan_active && !frozen) {
            int64_t fast_pos = -1, fast_base = 0;
            while (pos < limit) {
                const int64_t held_end = rd.bpos + (int64_t)rd.blen;
                if (pos + V2_HEADER_SIZE > held_end)
                    break;
                const uint8_t *fh = rd.buf + (pos - rd.bpos);
                const int32_t fsize = be32s(fh + 8);
                if (fh[16] != 2 || fsize < V2_HEADER_SIZE - LOG_OVERHEAD || (int64_t)fsize > end - pos - LOG_OVERHEAD)
                    break;
                const int64_t fend = pos + LOG_OVERHEAD + fsize;
                const int attrs = (int16_t)(((unsigned)fh[21] << 8) | fh[22]);
                const int64_t fbase = be64(fh), fpid = be64(fh + 43);
                const int64_t flast = wrap_add(fbase, be32s(fh + 23)), fmax_ts = be64(fh + 35);
                const int64_t relative = wrap_sub(flast, base_offset);
                if (fend > held_end || (attrs & 0x20) || relative < 0 || relative > INT32_MAX)
                    break;
                if (next_offset_probe < n_offset_probes && offset_probes[next_offset_probe] < fend)
                    break;
                if (next_time_probe < n_time_probes && time_probes[next_time_probe] <= (flast > k.top_last ? flast : k.top_last))
                    break;
                if (crc32c_fast(0, fh + CRC_START, (size_t)(fend - pos - CRC_START)) != be32(fh + 17))
                    break;
                /* accepted and kept: batch number `fi` */
                const int64_t fi = walked++;
                keep_batch(&k, fi, fend, flast, fmax_ts, 1);
                const int32_t fepoch = be32s(fh + 12);
                if (fepoch > max_epoch) { /* a new leader epoch starts here */
                    max_epoch = fepoch;
                    if (epoch_start(&epochs, fepoch, fbase) < 0) {
                        rd.nomem = 1;
                        failed = 1;
                        break;
                    }
                }
                if (pos - last_indexed > interval) {
                    int64_t row[ROW_WORDS] = {fi, pos, fbase, flast, k.running_max, k.max_offset, k.v2_next};
                    last_indexed = pos;
                    if (append_row(&entries, row) < 0) {
                        rd.nomem = 1;
                        failed = 1;
                        break;
                    }
                }
                /* a producer's data batch: its event, as the general step records it (compacted, so a run of one
                 * producer's batches looks its id up and adds nothing) */
                if (fpid > -1) {
                    const int16_t fpepoch = (int16_t)(((unsigned)fh[51] << 8) | fh[52]);
                    const int8_t fkind = (attrs & 0x10) ? 1 : 0;
                    pstate_t *st;
                    if (fpid == recent_pid && fkind == recent_kind) { /* the same producer and kind again: no event */
                        st = &pstates.items[recent_state];
                    } else {
                        Py_ssize_t slot = producer_event(&pids, &events, fi, fkind, fpid, fbase, pos);
                        st = slot < 0 ? NULL : producer_state(&pids, &pstates, slot, fpepoch);
                        if (st == NULL) {
                            rd.nomem = 1;
                            failed = 1;
                            break;
                        }
                        recent_pid = fpid;
                        recent_kind = fkind;
                        recent_state = pids.states[slot];
                    }
                    producer_data(st, fpepoch, be32s(fh + 53), be32s(fh + 23), fbase, flast, fmax_ts, attrs);
                }
                fast_pos = pos;
                fast_base = fbase;
                pos = fend;
            }
            if (fast_pos >= 0) {
                int64_t row[ROW_WORDS] = {k.n - 1,       fast_pos,     fast_base, k.last_offset,
                                          k.running_max, k.max_offset, k.v2_next};
                memcpy(last_row, row, sizeof row);
                have_last_row = 1;
            }
            if (failed)
                break;
        }
        if (pos >= limit) {
            stop = pos < end ? STOP_SHORT_TAIL : STOP_END;
            break;
        }
        {
            int64_t left = end - pos;
            size_t need = left < V2_HEADER_SIZE ? (size_t)left : V2_HEADER_SIZE;
            if (pos + (int64_t)need > rd.bpos + (int64_t)rd.blen && reader_fill(&rd, pos, need) < 0) {
                failed = 1;
                break;
            }
        }
        const uint8_t *h = rd.buf + (pos - rd.bpos);
        const int32_t size = be32s(h + 8);
        const int8_t magic = (int8_t)h[16];
        if (size < MIN_SIZE_FIELD) {
            problem = (problem_t){1, P_SIZE, pos, walked, be64(h), size, 0, NULL};
            stop = STOP_CORRUPT_BATCH;
            break;
        }
        if ((int64_t)size > end - pos - LOG_OVERHEAD) {
            problem = (problem_t){1, P_TRUNCATED, pos, walked, be64(h), LOG_OVERHEAD + (int64_t)size, end, NULL};
            stop = STOP_INCOMPLETE_BATCH;
            break;
        }
        const int64_t batch_end = pos + LOG_OVERHEAD + size;
        const int64_t batch_base = be64(h);
        int64_t batch_last, max_ts, producer_id;
        int attributes, records_count, is_v2 = magic >= 2, needs_marker = 0;
        int32_t leader_epoch = -1, base_sequence = -1, last_delta = 0; /* v2 only: read while the header is held */
        int16_t producer_epoch = -1;
        uint32_t stored, computed;
        if (is_v2) {
            if (LOG_OVERHEAD + size < V2_HEADER_SIZE) {
                problem = (problem_t){1, P_V2_SIZE, pos, walked, batch_base, LOG_OVERHEAD + (int64_t)size, 0, NULL};
                stop = STOP_CORRUPT_BATCH;
                break;
            }
            stored = be32(h + 17);
            attributes = (int16_t)(((unsigned)h[21] << 8) | h[22]);
            leader_epoch = be32s(h + 12);
            last_delta = be32s(h + 23);
            batch_last = wrap_add(batch_base, last_delta);
            max_ts = be64(h + 35);
            producer_id = be64(h + 43);
            producer_epoch = (int16_t)(((unsigned)h[51] << 8) | h[52]);
            base_sequence = be32s(h + 53);
            records_count = be32s(h + 57);
            needs_marker = (attributes & 0x20) && producer_id > -1 && records_count != 0 && !frozen;
            if (needs_marker && (attributes & 7) <= 4) { /* hold the whole batch for the parser */
                if (reader_fill(&rd, pos, (size_t)(batch_end - pos)) < 0) {
                    failed = 1;
                    break;
                }
                h = rd.buf + (pos - rd.bpos);
            }
            if (batch_end <= rd.bpos + (int64_t)rd.blen) /* the common case: the batch is held */
                computed = crc32c_fast(0, h + CRC_START, (size_t)(batch_end - pos - CRC_START));
            else if (crc_stream(&rd, 0, pos + CRC_START, batch_end, &computed) < 0) {
                failed = 1;
                break;
            }
            if (computed != stored) {
                problem = (problem_t){1, P_CRC_V2, pos, walked, batch_base, stored, computed, NULL};
                stop = STOP_CORRUPT_BATCH;
                break;
            }
        } else {
            stored = be32(h + 12);
            attributes = h[17];
            batch_last = batch_base;
            max_ts = magic == 1 ? be64(h + 18) : -1;
            producer_id = -1;
            records_count = -1;
            if (batch_end <= rd.bpos + (int64_t)rd.blen)
                computed = crc32_ieee(0, h + 16, (size_t)(batch_end - pos - 16));
            else if (crc_stream(&rd, 1, pos + 16, batch_end, &computed) < 0) {
                failed = 1;
                break;
            }
            if (computed != stored) {
                problem = (problem_t){1, P_CRC_LEGACY, pos, walked, batch_base, stored, computed, NULL};
                stop = STOP_CORRUPT_BATCH;
                break;
            }
        }
        /* accepted: batch number `i` of the walk */
        const int64_t i = walked++;
        const int64_t batch_pos = pos;
        pos = batch_end;
        if (frozen)
            continue; /* only the walk's own end is still looked for */
        int marker_type = -1, invalid = 0, unknown = 0, refused = 0;
        int32_t marker_coordinator_epoch = -1;
        int64_t marker_timestamp = -1;
        if (needs_marker) {
            int codec = attributes & 7;
            if (codec > 4) { /* an unknown codec: never read, the valid data ends before it */
                fatal = (problem_t){1, F_COMPRESSED_CONTROL, batch_pos, i, batch_base, codec, 0, NULL};
                frozen = 1;
                continue;
            }
            /* a compressed one (codec 1-4) too: the parser decompresses it, this loop never does */
            PyEval_RestoreThread(thread);
            PyObject *batch = PyBytes_FromStringAndSize((const char *)h, batch_end - batch_pos);
            PyObject *answer = batch == NULL ? NULL : PyObject_CallFunction(parser, "(Oi)", batch, records_count);
            Py_XDECREF(batch);
            if (answer == NULL) {
                parser_error = 1;
            } else if (PyTuple_Check(answer) && PyTuple_GET_SIZE(answer) == 1 &&
                       PyUnicode_Check(PyTuple_GET_ITEM(answer, 0))) {
                /* (why,): the compressed batch cannot be read here (its codec's package is missing, or its
                 * bytes do not decompress): a refusal, as for an unknown codec; never read, nor kept */
                PyObject *why = Py_NewRef(PyTuple_GET_ITEM(answer, 0));
                fatal = (problem_t){1, F_COMPRESSED_CONTROL, batch_pos, i, batch_base, codec, 0, why};
                refused = 1;
            } else if (PyUnicode_Check(answer)) {
                problem = (problem_t){1, P_INVALID_MARKER, batch_pos, i, batch_base, 0, 0, answer};
                answer = NULL; /* owned by the problem */
                invalid = 1;
            } else if (PyLong_Check(answer) || (PyTuple_Check(answer) && PyTuple_GET_SIZE(answer) == 3)) {
                /* the control type alone (marker_type_or_error), or with the coordinator epoch and the record's
                 * timestamp (marker_fields_or_error) */
                PyObject *type_answer = PyLong_Check(answer) ? answer : PyTuple_GET_ITEM(answer, 0);
                int overflow = 0, bad_fields = 0;
                if (PyTuple_Check(answer)) { /* an int32 and an int64, else a ValueError (or the TypeError raised) */
                    long long ce = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(answer, 1), &overflow);
                    bad_fields = overflow || ce < INT32_MIN || ce > INT32_MAX || (ce == -1 && PyErr_Occurred());
                    long long ts = 0;
                    if (!bad_fields) {
                        ts = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(answer, 2), &overflow);
                        bad_fields = overflow || (ts == -1 && PyErr_Occurred());
                    }
                    marker_coordinator_epoch = (int32_t)ce;
                    marker_timestamp = (int64_t)ts;
                    overflow = 0;
                } else {
                    marker_details = 0;
                }
                long long t = bad_fields ? 0 : PyLong_AsLongLongAndOverflow(type_answer, &overflow);
                if (bad_fields) {
                    if (!PyErr_Occurred())
                        PyErr_Format(PyExc_ValueError,
                                     "scan_segment: marker_parser returned %R, not (short, int, long)", answer);
                    parser_error = 1;
                } else if (overflow || t < INT16_MIN || t > INT16_MAX) { /* a control type is a Java short */
                    if (!PyErr_Occurred())
                        PyErr_Format(PyExc_ValueError, "scan_segment: marker_parser returned %R, not a short",
                                     answer);
                    parser_error = 1;
                } else if (t == -1 && PyErr_Occurred()) {
                    parser_error = 1;
                } else {
                    marker_type = (int)t;
                    unknown = marker_type != 0 && marker_type != 1;
                    if (unknown)
                        fatal = (problem_t){1, F_UNKNOWN_CONTROL_TYPE, batch_pos, i, batch_base, t, 0, NULL};
                }
            } else {
                PyErr_Format(PyExc_TypeError,
                             "scan_segment: marker_parser must return an int, a 3-tuple or a str, not %.100s",
                             Py_TYPE(answer)->tp_name);
                parser_error = 1;
            }
            Py_XDECREF(answer);
            thread = PyEval_SaveThread();
            if (parser_error) {
                failed = 1;
                break;
            }
            if (refused) {
                frozen = 1;
                continue;
            }
        }
        /* batch i is kept: n = i + 1 */
        keep_batch(&k, i, batch_end, batch_last, max_ts, is_v2);
        /* lookups (the offset probes read prev_last, not top_last, which keep_batch has already raised) */
        while (next_offset_probe < n_offset_probes && offset_probes[next_offset_probe] < batch_end) {
            if (offset_probes[next_offset_probe] >= batch_pos) {
                int64_t *a = offset_answers + 3 * next_offset_probe;
                a[0] = batch_pos;
                a[1] = batch_base;
                a[2] = k.prev_last;
            }
            next_offset_probe++;
        }
        while (next_time_probe < n_time_probes && time_probes[next_time_probe] <= k.top_last)
            time_answers[next_time_probe++] = k.raw_max;
        /* the plan: rows, and the events of batches i < min(plan_end + 1, n) */
        if (plan_active) {
            int64_t row[ROW_WORDS] = {i, batch_pos, batch_base, batch_last, k.running_max, k.max_offset, k.v2_next};
            int64_t relative = wrap_sub(batch_last, base_offset);
            if (relative < 0 || relative > INT32_MAX || unknown) {
                plan_active = 0;
                plan_end = i;
                memcpy(stop_row, row, sizeof row);
                have_stop_row = 1;
            } else {
                if (batch_pos - last_indexed > interval) {
                    last_indexed = batch_pos;
                    if (append_row(&entries, row) < 0) {
                        rd.nomem = 1;
                        failed = 1;
                        break;
                    }
                }
                memcpy(last_row, row, sizeof row);
                have_last_row = 1;
            }
            /* plan_active still: batch i < plan_end, one Kafka's recover takes whole (leader epoch, producer state) */
            if (plan_active && is_v2 && leader_epoch > max_epoch) {
                max_epoch = leader_epoch;
                if (epoch_start(&epochs, leader_epoch, batch_base) < 0) {
                    rd.nomem = 1;
                    failed = 1;
                    break;
                }
            }
            if (is_v2 && producer_id > -1) {
                recent_pid = -1;
                int control = (attributes & 0x20) != 0;
                int8_t kind;
                if (control)
                    kind = marker_type == 0 ? 2 : marker_type == 1 ? 3 : -1;
                else
                    kind = (attributes & 0x10) ? 1 : 0;
                Py_ssize_t slot =
                    kind < 0 ? 0 : producer_event(&pids, &events, i, kind, producer_id, batch_base, batch_pos);
                pstate_t *st = NULL;
                if (slot >= 0 && kind >= 0 && plan_active) {
                    st = producer_state(&pids, &pstates, slot, producer_epoch);
                    if (st != NULL && control)
                        producer_marker(st, producer_epoch, marker_coordinator_epoch, marker_timestamp);
                    else if (st != NULL)
                        producer_data(st, producer_epoch, base_sequence, last_delta, batch_base, batch_last, max_ts,
                                      attributes);
                }
                if (slot < 0 || (kind >= 0 && plan_active && st == NULL)) {
                    rd.nomem = 1;
                    failed = 1;
                    break;
                }
            }
        }
        if (invalid) {
            stop = STOP_INVALID_RECORD;
            break;
        }
        if (unknown)
            frozen = 1;
    }
    prefetch_stop(&rd);
    PyEval_RestoreThread(thread);

    if (failed) {
        if (parser_error) {
            /* the exception is already set */
        } else if (rd.nomem) {
            PyErr_NoMemory();
        } else if (rd.err == ERR_SOURCE && rd.source_error != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(rd.source_error), rd.source_error);
        } else if (rd.err > 0) {
            errno = rd.err;
            PyErr_SetFromErrno(PyExc_OSError);
        } else {
            PyErr_SetString(PyExc_OSError, "file shrank while being read");
        }
        goto done;
    }
    if (plan_active)
        plan_end = k.n;
    /* Copy the results out one at a time, each C buffer freed as soon as its copy exists, and the walk's own
     * buffers first: the peak is then about the largest result twice, not every result twice. */
    reader_free(&rd);
    pidmap_free(&pids);
    PyMem_RawFree(offset_probes);
    PyMem_RawFree(time_probes);
    offset_probes = time_probes = NULL;
    PyObject *out_entries = PyBytes_FromStringAndSize(entries.data ? entries.data : "", (Py_ssize_t)entries.len);
    PyMem_RawFree(entries.data);
    entries.data = NULL;
    PyObject *out_events = PyBytes_FromStringAndSize(events.data ? events.data : "", (Py_ssize_t)events.len);
    PyMem_RawFree(events.data);
    events.data = NULL;
    PyObject *out_offsets = PyBytes_FromStringAndSize((const char *)offset_answers,
                                                      n_offset_probes * 3 * (Py_ssize_t)sizeof(int64_t));
    PyMem_RawFree(offset_answers);
    offset_answers = NULL;
    PyObject *out_times =
        PyBytes_FromStringAndSize((const char *)time_answers, n_time_probes * (Py_ssize_t)sizeof(int64_t));
    PyMem_RawFree(time_answers);
    time_answers = NULL;
    PyObject *out_epochs = PyBytes_FromStringAndSize(epochs.data ? epochs.data : "", (Py_ssize_t)epochs.len);
    PyMem_RawFree(epochs.data);
    epochs.data = NULL;
    PyObject *out_producers = marker_details ? producers_bytes(&pstates) : Py_NewRef(Py_None);
    PyMem_RawFree(pstates.items);
    pstates.items = NULL;
    if (out_entries == NULL || out_events == NULL || out_offsets == NULL || out_times == NULL || out_epochs == NULL ||
        out_producers == NULL) {
        Py_XDECREF(out_entries);
        Py_XDECREF(out_events);
        Py_XDECREF(out_offsets);
        Py_XDECREF(out_times);
        Py_XDECREF(out_epochs);
        Py_XDECREF(out_producers);
        goto done;
    }
    result = Py_BuildValue(
        "{s:L,s:L,s:L,s:i,s:N,s:N,s:L,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}", "batch_count", (long long)k.n,
        "valid_bytes", (long long)k.valid_bytes, "walked", (long long)walked, "stop", stop, "problem",
        problem_tuple(&problem), "fatal", problem_tuple(&fatal), "plan_end", (long long)plan_end, "entries",
        out_entries, "last_row", have_last_row ? row_tuple(last_row) : Py_NewRef(Py_None), "stop_row",
        have_stop_row ? row_tuple(stop_row) : Py_NewRef(Py_None), "events", out_events, "offset_answers",
        out_offsets, "time_answers", out_times, "last_offset",
        k.n ? PyLong_FromLongLong(k.last_offset) : Py_NewRef(Py_None), "raw_max",
        k.n ? PyLong_FromLongLong(k.raw_max) : Py_NewRef(Py_None), "epoch_starts", out_epochs, "producers",
        out_producers);

done:
    PyBuffer_Release(&offset_view);
    PyBuffer_Release(&time_view);
    PyMem_RawFree(offset_probes);
    PyMem_RawFree(time_probes);
    PyMem_RawFree(offset_answers);
    PyMem_RawFree(time_answers);
    reader_free(&rd);
    pidmap_free(&pids);
    PyMem_RawFree(entries.data);
    PyMem_RawFree(events.data);
    PyMem_RawFree(epochs.data);
    PyMem_RawFree(pstates.items);
    Py_XDECREF(problem.text);
    Py_XDECREF(fatal.text);
    return result;
}

static PyObject *py_crc32c_interleaved(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &view, &crc))
        return NULL;
    uint32_t value;
    Py_BEGIN_ALLOW_THREADS;
    value = use_hardware ? crc32c_fast(crc, (const uint8_t *)view.buf, (size_t)view.len)
                         : crc32c_table3(crc, (const uint8_t *)view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(value);
}

static PyMethodDef methods[] = {
    {"walk_v2", walk_v2, METH_VARARGS, "walk_v2(buffer, pos, end) -> (positions: bytes of int64, pos)"},
    {"crc32c", py_crc32c, METH_VARARGS, "crc32c(buffer, crc=0) -> CRC-32C (hardware when available)"},
    {"crc32c_table", py_crc32c_table, METH_VARARGS, "crc32c_table(buffer, crc=0) -> CRC-32C (table only)"},
    {"hardware", py_hardware, METH_NOARGS, "whether the CPU's CRC-32C instruction is used"},
    {"crc32c_interleaved", py_crc32c_interleaved, METH_VARARGS,
     "crc32c_interleaved(buffer, crc=0) -> CRC-32C through the three-stream path of scan_segment"},
    {"scan_segment", scan_segment, METH_VARARGS,
     "scan_segment(fd, end, base_offset, index_interval_bytes, offset_probes, time_probes, marker_parser, "
     "window=1 << 20) -> dict: the streaming walk of a .log (see _kernel.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "indexlib.format._kernel", "The compiled inner loop of indexlib.format.batch_walk.scan_buffer.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (crc_init() < 0) {
        PyErr_SetString(PyExc_ImportError, "indexlib.format._kernel: its CRC tables give wrong known answers (a miscompiled build)");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    static const struct {
        const char *name;
        int value;
    } constants[] = {
        {"P_SIZE", P_SIZE},
        {"P_V2_SIZE", P_V2_SIZE},
        {"P_TRUNCATED", P_TRUNCATED},
        {"P_CRC_V2", P_CRC_V2},
        {"P_CRC_LEGACY", P_CRC_LEGACY},
        {"P_INVALID_MARKER", P_INVALID_MARKER},
        {"F_COMPRESSED_CONTROL", F_COMPRESSED_CONTROL},
        {"F_UNKNOWN_CONTROL_TYPE", F_UNKNOWN_CONTROL_TYPE},
    };
    for (size_t k = 0; k < sizeof constants / sizeof constants[0]; k++)
        if (PyModule_AddIntConstant(m, constants[k].name, constants[k].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}

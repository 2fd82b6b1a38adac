/*
 * CRC-32C (Castagnoli) and CRC32 (IEEE) for indexlib.format._kernel: static functions only, no Python, so that a
 * standalone C program (tests/indexlib/crc32c_check.c) can check them on any CPU, an emulated one included.
 *
 * crc_init() must run once before any other function: it builds the tables and checks them (the slicing
 * tables against a bit-at-a-time CRC without tables, the three-stream table combination against the one-
 * stream table, on lengths around every block edge, and the known answers of "123456789"); it returns -1
 * if any of that fails (the module then refuses to load and indexlib falls back to its pure-Python scan).
 * It turns the CPU's instruction on (use_hardware) only when the CPU has it AND the one- and three-stream
 * hardware paths agree with the checked table on those lengths. A compiler or a CPU that gets the
 * instruction wrong costs speed, not a batch wrongly called corrupt, on every length the self-test covers.
 *
 * CRC32C_FAULT_AT_LENGTH (tests only, never defined in a build of the module): the one-stream hardware path
 * returns a wrong CRC for that length, so crc32c_check.c can show crc_init keeping a wrong path off.
 *
 * crc32c()       one stream (hardware when on, else slicing-by-8 tables);
 * crc32c_fast()  one stream below three small blocks, three interleaved streams above (the scan's);
 * crc32c_table3() the three-stream combination computed with the table (checks it on any CPU);
 * crc32_ieee()   CRC32 of legacy (magic 0 and 1) entries.
 */
#ifndef INDEXLIB_CRC32C_H
#define INDEXLIB_CRC32C_H

#include <stddef.h>
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

/* ------------------------------------------------------------------------------------ CRC-32C */
static uint32_t crc_table[8][256];
static int use_hardware = 0;

/* Slicing-by-8 tables of a reflected CRC-32 polynomial (CRC-32C's here, and CRC32's for legacy entries). */
static void init_slicing_table(uint32_t table[8][256], uint32_t polynomial) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ polynomial : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
}

static uint32_t crc_slicing(const uint32_t table[8][256], uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap64(v);
#endif
        v ^= crc;
        crc = table[7][v & 0xFF] ^ table[6][(v >> 8) & 0xFF] ^ table[5][(v >> 16) & 0xFF] ^ table[4][(v >> 24) & 0xFF] ^
              table[3][(v >> 32) & 0xFF] ^ table[2][(v >> 40) & 0xFF] ^ table[1][(v >> 48) & 0xFF] ^ table[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

static void init_table(void) { init_slicing_table(crc_table, 0x82F63B78u); }

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n) { return crc_slicing(crc_table, crc, p, n); }

#ifdef CRC32C_FAULT_AT_LENGTH
#define CRC32C_FAULT(value, length) ((length) == CRC32C_FAULT_AT_LENGTH ? (value) ^ 1u : (value))
#else
#define CRC32C_FAULT(value, length) (value)
#endif

#if defined(KERNEL_X86)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t length) {
    size_t n = length;
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    if (n >= 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        c32 = _mm_crc32_u32(c32, v);
        p += 4;
        n -= 4;
    }
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return CRC32C_FAULT(~c32, length);
}
#elif defined(KERNEL_ARM)
__attribute__((target("+crc"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t length) {
    size_t n = length;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __crc32cd(c, v);
        p += 8;
        n -= 8;
    }
    if (n >= 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        c = __crc32cw(c, v);
        p += 4;
        n -= 4;
    }
    while (n--)
        c = __crc32cb(c, *p++);
    return CRC32C_FAULT(~c, length);
}
#endif

static inline uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n) {
#if defined(KERNEL_X86) || defined(KERNEL_ARM)
    if (use_hardware)
        return crc32c_hw(crc, p, n);
#endif
    return crc32c_table(crc, p, n);
}

#if defined(KERNEL_X86) || defined(KERNEL_ARM)
static int detect_hardware(void) {
#if defined(KERNEL_X86)
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
#elif defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#elif defined(__APPLE__)
    return 1; /* every Apple arm64 CPU has the CRC extension */
#else
    return 0;
#endif
}
#endif
/* ------------------------------------------------------------------- CRC-32C, three streams */
/*
 * Buffers of three blocks or more are checked as three interleaved CRC streams over consecutive blocks (the
 * CPU's CRC instruction has a latency of about three cycles and a throughput of one per cycle, so one stream
 * uses a third of it). CRC is linear on the raw (un-inverted) state: state(A || B) = shift(state(A), |B|) XOR
 * state_from_zero(B), where shift(x, L) is the state reached from x over L zero bytes, a linear map on 32 bits,
 * applied as four byte-indexed tables built at module init from the table CRC. Two block sizes: CRC_BLOCK
 * for long batches, SMALL_BLOCK for the rest of them and for small batches (a 170-byte batch's 149 checked
 * bytes are three small blocks and 5 bytes), whose three streams are combined by shifting the first two by
 * two and one blocks at once (shorter than two shifts one after the other).
 */
#define CRC_BLOCK 1024
#define SMALL_BLOCK 48
typedef uint32_t shift_table_t[4][256];
static shift_table_t crc_shift;           /* shift by CRC_BLOCK zero bytes */
static shift_table_t small_shift;         /* by SMALL_BLOCK */
static shift_table_t small_shift2;        /* by 2 * SMALL_BLOCK */

static void init_shift_table(shift_table_t table, size_t zero_bytes) {
    static const uint8_t zeros[2 * CRC_BLOCK];
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) /* raw state after the zeros, from the raw state 1 << bit */
        basis[bit] = ~crc32c_table(~(UINT32_C(1) << bit), zeros, zero_bytes);
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t x = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1u << b))
                    x ^= basis[8 * k + b];
            table[k][v] = x;
        }
}

static void init_shift(void) {
    init_shift_table(crc_shift, CRC_BLOCK);
    init_shift_table(small_shift, SMALL_BLOCK);
    init_shift_table(small_shift2, 2 * SMALL_BLOCK);
}

static inline uint32_t shift_by(const shift_table_t table, uint32_t x) {
    return table[0][x & 0xFF] ^ table[1][(x >> 8) & 0xFF] ^ table[2][(x >> 16) & 0xFF] ^ table[3][x >> 24];
}

/* The raw state after three streams of `block` bytes at p (the first from r, the others from 0). */
#define CRC3_COMBINE_BIG(a, b, c) shift_by(crc_shift, shift_by(crc_shift, (a)) ^ (b)) ^ (c)
#define CRC3_COMBINE_SMALL(a, b, c) shift_by(small_shift2, (a)) ^ shift_by(small_shift, (b)) ^ (c)

#if defined(KERNEL_X86)
#define CRC_STEP(state, value) _mm_crc32_u64((state), (value))
#define HW_TARGET __attribute__((target("sse4.2")))
typedef uint64_t hw_state_t;
#elif defined(KERNEL_ARM)
#define CRC_STEP(state, value) __crc32cd((state), (value))
#define HW_TARGET __attribute__((target("+crc")))
typedef uint32_t hw_state_t;
#endif

#if defined(KERNEL_X86) || defined(KERNEL_ARM)
#define CRC3_BLOCKS(block, r, p, combine)                                                                             \
    do {                                                                                                             \
        hw_state_t a = (r), b = 0, c = 0;                                                                            \
        for (size_t k = 0; k < (block); k += 8) {                                                                    \
            uint64_t va, vb, vc;                                                                                     \
            memcpy(&va, (p) + k, 8);                                                                                 \
            memcpy(&vb, (p) + (block) + k, 8);                                                                       \
            memcpy(&vc, (p) + 2 * (block) + k, 8);                                                                   \
            a = CRC_STEP(a, va);                                                                                     \
            b = CRC_STEP(b, vb);                                                                                     \
            c = CRC_STEP(c, vc);                                                                                     \
        }                                                                                                            \
        (r) = combine((uint32_t)a, (uint32_t)b, (uint32_t)c);                                                        \
    } while (0)

HW_TARGET static uint32_t crc32c_hw3(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t r = ~crc;
    for (; n >= 3 * CRC_BLOCK; p += 3 * CRC_BLOCK, n -= 3 * CRC_BLOCK)
        CRC3_BLOCKS(CRC_BLOCK, r, p, CRC3_COMBINE_BIG);
    for (; n >= 3 * SMALL_BLOCK; p += 3 * SMALL_BLOCK, n -= 3 * SMALL_BLOCK)
        CRC3_BLOCKS(SMALL_BLOCK, r, p, CRC3_COMBINE_SMALL);
    return crc32c_hw(~r, p, n);
}
#endif

/* Three-way table fallback, so that crc32c_interleaved checks the combination on any CPU. */
static uint32_t crc32c_table3(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t r = ~crc;
    for (; n >= 3 * CRC_BLOCK; p += 3 * CRC_BLOCK, n -= 3 * CRC_BLOCK) {
        uint32_t a = ~crc32c_table(~r, p, CRC_BLOCK);
        uint32_t b = ~crc32c_table(~UINT32_C(0), p + CRC_BLOCK, CRC_BLOCK);
        uint32_t c = ~crc32c_table(~UINT32_C(0), p + 2 * CRC_BLOCK, CRC_BLOCK);
        r = CRC3_COMBINE_BIG(a, b, c);
    }
    for (; n >= 3 * SMALL_BLOCK; p += 3 * SMALL_BLOCK, n -= 3 * SMALL_BLOCK) {
        uint32_t a = ~crc32c_table(~r, p, SMALL_BLOCK);
        uint32_t b = ~crc32c_table(~UINT32_C(0), p + SMALL_BLOCK, SMALL_BLOCK);
        uint32_t c = ~crc32c_table(~UINT32_C(0), p + 2 * SMALL_BLOCK, SMALL_BLOCK);
        r = CRC3_COMBINE_SMALL(a, b, c);
    }
    return crc32c_table(~r, p, n);
}

#if defined(KERNEL_X86) || defined(KERNEL_ARM)
/* The hardware CRC-32C of a batch: one stream below three small blocks, three interleaved streams above. */
static inline uint32_t crc32c_hw_batch(uint32_t crc, const uint8_t *p, size_t n) {
    return n >= 3 * SMALL_BLOCK ? crc32c_hw3(crc, p, n) : crc32c_hw(crc, p, n);
}
#endif

/* CRC-32C of a batch: crc32c_hw_batch when the hardware is on, else the table. */
static inline uint32_t crc32c_fast(uint32_t crc, const uint8_t *p, size_t n) {
#if defined(KERNEL_X86) || defined(KERNEL_ARM)
    if (use_hardware)
        return crc32c_hw_batch(crc, p, n);
#endif
    return crc32c_table(crc, p, n);
}

/* ----------------------------------------------------------------- CRC32 (IEEE, legacy entries) */
static uint32_t ieee_table[8][256];

static void init_ieee(void) { init_slicing_table(ieee_table, 0xEDB88320u); }

static uint32_t crc32_ieee(uint32_t crc, const uint8_t *p, size_t n) { return crc_slicing(ieee_table, crc, p, n); }

/* ------------------------------------------------------------------------------------- self-test */
typedef uint32_t (*crc_function_t)(uint32_t crc, const uint8_t *p, size_t n);

/* The self-test's bytes: any will do as long as they are not all equal (xorshift). */
enum { SELF_TEST_SPAN = 3 * CRC_BLOCK + 3 * SMALL_BLOCK + 24 };
static uint8_t self_test_data[SELF_TEST_SPAN + 8];

static void fill_self_test_data(void) {
    uint32_t x = 0x9E3779B9u;
    for (size_t k = 0; k < sizeof self_test_data; k++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self_test_data[k] = (uint8_t)x;
    }
}

/* A reflected CRC one bit at a time, no table: the judge of the slicing tables. */
static uint32_t crc_bitwise(uint32_t polynomial, uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ polynomial : crc >> 1;
    }
    return ~crc;
}

/* Whether the slicing tables give the bit-at-a-time CRC for every length up to 40 and a few long ones. */
static int tables_agree_with_bitwise(void) {
    static const size_t lengths[] = {64, 149, 1000, SELF_TEST_SPAN};
    for (size_t n = 0; n <= 40 + sizeof lengths / sizeof lengths[0]; n++) {
        size_t length = n <= 40 ? n : lengths[n - 41];
        const uint8_t *p = self_test_data + (n % 8);
        if (crc32c_table(0x12345678u, p, length) != crc_bitwise(0x82F63B78u, 0x12345678u, p, length) ||
            crc32_ieee(0x12345678u, p, length) != crc_bitwise(0xEDB88320u, 0x12345678u, p, length))
            return 0;
    }
    return 1;
}

/* Whether `fn` gives the table's CRC-32C at two alignments for every length around each block edge. */
static int crc_agrees_with_table(crc_function_t fn) {
    static const size_t edges[] = {0, 8, 3 * SMALL_BLOCK, 6 * SMALL_BLOCK, 3 * CRC_BLOCK, 3 * CRC_BLOCK + 3 * SMALL_BLOCK};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        for (size_t n = edges[e] > 9 ? edges[e] - 9 : 0; n <= edges[e] + 9 && n <= SELF_TEST_SPAN; n++)
            for (size_t start = 0; start < 8; start += 5) /* 0 and 5: aligned and odd */
                if (fn(0x12345678u, self_test_data + start, n) != crc32c_table(0x12345678u, self_test_data + start, n))
                    return 0;
    return 1;
}

/* Tables, their checks, and the hardware choice (see the top of this file); -1 when a table is wrong. The
 * checks take about 0.8 ms (python -X importtime on the module). */
static int crc_init(void) {
    init_table();
    init_shift();
    init_ieee();
    fill_self_test_data();
    static const uint8_t digits[] = "123456789";
    if (crc32c_table(0, digits, 9) != 0xE3069283u || crc32_ieee(0, digits, 9) != 0xCBF43926u ||
        !tables_agree_with_bitwise() || !crc_agrees_with_table(crc32c_table3))
        return -1;
    use_hardware = 0;
#if defined(KERNEL_X86) || defined(KERNEL_ARM)
    use_hardware = detect_hardware() && crc_agrees_with_table(crc32c_hw) && crc_agrees_with_table(crc32c_hw_batch);
#endif
    return 0;
}

#endif /* INDEXLIB_CRC32C_H */

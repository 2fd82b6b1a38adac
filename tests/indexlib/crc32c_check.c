/*
 * A standalone check of indexlib/format/_crc32c.h, the compiled kernel's CRC code, without Python: built and run by
 * tests/indexlib/test_crc32c_native.py natively and, where a cross compiler and QEMU's user-mode emulator
 * are installed, for aarch64 (the CRC extension) and for an x86-64 CPU without SSE4.2 (the table path).
 *
 * Usage: crc32c_check LENGTH... < DATA
 * Prints "hardware H" (whether crc_init turned the CPU's instruction on), then one line per LENGTH:
 *   LENGTH crc32c crc32c_fast crc32c_table crc32c_table3 crc32_ieee
 * over the first LENGTH bytes of DATA (all in hex), then "rejects B" for each deliberately broken function
 * handed to the self-test (B = 1 when the self-test refused it). Exit 2 when crc_init fails.
 * Built with -DCRC32C_FAULT_AT_LENGTH=N, the header's one-stream hardware path is wrong at length N: crc_init
 * must then leave the hardware off ("hardware 0") and every CRC printed must still be right.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "_crc32c.h"

static size_t broken_length;

/* The table's CRC-32C, with one bit wrong at one length only: what a wrong edge case would look like. */
static uint32_t broken_at_length(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t value = crc32c_table(crc, p, n);
    return n == broken_length ? value ^ 1u : value;
}

int main(int argc, char **argv) {
    static uint8_t data[1 << 16];
    size_t have = fread(data, 1, sizeof data, stdin);
    if (crc_init() < 0) {
        printf("init failed\n");
        return 2;
    }
    printf("hardware %d\n", use_hardware);
    for (int k = 1; k < argc; k++) {
        size_t n = strtoul(argv[k], NULL, 10);
        if (n > have) {
            fprintf(stderr, "crc32c_check: length %zu is more than the %zu bytes read\n", n, have);
            return 1;
        }
        printf("%zu %08" PRIx32 " %08" PRIx32 " %08" PRIx32 " %08" PRIx32 " %08" PRIx32 "\n", n, crc32c(0, data, n),
               crc32c_fast(0, data, n), crc32c_table(0, data, n), crc32c_table3(0, data, n), crc32_ieee(0, data, n));
    }
    static const size_t broken[] = {0, 3 * SMALL_BLOCK, 3 * CRC_BLOCK + 1};
    for (size_t k = 0; k < sizeof broken / sizeof broken[0]; k++) {
        broken_length = broken[k];
        printf("rejects %d\n", !crc_agrees_with_table(broken_at_length));
    }
    return 0;
}

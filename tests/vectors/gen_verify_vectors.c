/*
 * Test vectors for the Verify tag functions (docs/verify-header.md, "The Verify shim
 * header").  Compiled together with Open vSwitch's own lib/jhash.c (see
 * generate.sh), so "jhash_bytes" here is exactly OVS's implementation.
 *
 * Prints one JSON object on stdout:
 *   jhash_bytes:  {data (hex), basis, hash}
 *   verify_port:  {dpid, in_port, before, after}
 *   verify_rule:  {dpid, table_id, priority, cookie, rule_id, before, after}
 *
 * All inputs come from a fixed-seed splitmix64 generator plus hand-picked
 * edge cases, so the output is fully deterministic.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* From OVS lib/jhash.h. */
uint32_t jhash_bytes(const void *, size_t n_bytes, uint32_t basis);

static uint64_t rng_state = 0x5041525a20564552ULL;   /* "PAZZ VER" */

static uint64_t
rng64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t rng32(void) { return rng64() >> 32; }

static void
put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = v & 0xff;
        v >>= 8;
    }
}

/* set_verify_port: OR in the three Bloom bits of u_p = dpid(8 BE) | in_port(4 BE). */
static uint32_t
verify_port_bits(uint64_t dpid, uint32_t in_port)
{
    uint8_t u[12];
    put_be(u, dpid, 8);
    put_be(u + 8, in_port, 4);
    uint32_t h = jhash_bytes(u, sizeof u, 0);
    uint32_t h1 = h & 0xffff, h2 = h >> 16, bits = 0;
    for (uint32_t i = 0; i < 3; i++) {
        bits |= UINT32_C(1) << ((h1 + i * h2) % 32);
    }
    return bits;
}

/* CRC-16/CCITT: poly 0x1021, MSB first, no reflection, no final XOR. */
static uint16_t
crc16_ccitt(uint16_t crc, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t) p[i] << 8;
        for (int b = 0; b < 8; b++) {
            crc = (crc & 0x8000) ? (uint16_t) ((crc << 1) ^ 0x1021)
                                 : (uint16_t) (crc << 1);
        }
    }
    return crc;
}

/* set_verify_rule: u_r = dpid(8) | table_id(1) | priority(2) | cookie(8) | rule_id(4). */
static uint16_t
verify_rule_step(uint16_t before, uint64_t dpid, uint8_t table_id,
                 uint16_t priority, uint64_t cookie, uint32_t rule_id)
{
    uint8_t u[23];
    put_be(u, dpid, 8);
    u[8] = table_id;
    put_be(u + 9, priority, 2);
    put_be(u + 11, cookie, 8);
    put_be(u + 19, rule_id, 4);
    return crc16_ccitt(before, u, sizeof u);
}

static void
emit_jhash(int first, const uint8_t *data, size_t n, uint32_t basis)
{
    printf("%s\n    {\"data\": \"", first ? "" : ",");
    for (size_t i = 0; i < n; i++) {
        printf("%02x", data[i]);
    }
    printf("\", \"basis\": %" PRIu32 ", \"hash\": %" PRIu32 "}",
           basis, jhash_bytes(data, n, basis));
}

static void
emit_port(int first, uint64_t dpid, uint32_t in_port, uint32_t before)
{
    printf("%s\n    {\"dpid\": %" PRIu64 ", \"in_port\": %" PRIu32
           ", \"before\": %" PRIu32 ", \"after\": %" PRIu32 "}",
           first ? "" : ",", dpid, in_port, before,
           before | verify_port_bits(dpid, in_port));
}

static void
emit_rule(int first, uint64_t dpid, uint8_t table_id, uint16_t priority,
          uint64_t cookie, uint32_t rule_id, uint16_t before)
{
    printf("%s\n    {\"dpid\": %" PRIu64 ", \"table_id\": %u, \"priority\": %u"
           ", \"cookie\": %" PRIu64 ", \"rule_id\": %" PRIu32
           ", \"before\": %u, \"after\": %u}",
           first ? "" : ",", dpid, table_id, priority, cookie, rule_id,
           before, verify_rule_step(before, dpid, table_id, priority, cookie,
                                    rule_id));
}

int
main(void)
{
    uint8_t buf[64];
    int first;

    printf("{\"jhash_bytes\": [");
    first = 1;
    /* Every length 0..40 (covers 12, 24, 36 with no final mix), basis 0. */
    for (size_t n = 0; n <= 40; n++) {
        for (size_t i = 0; i < n; i++) {
            buf[i] = rng64() & 0xff;
        }
        emit_jhash(first, buf, n, 0);
        first = 0;
    }
    /* Random lengths and bases. */
    for (int k = 0; k < 24; k++) {
        size_t n = k < 4 ? 12 * (k + 1) : rng64() % 49;
        for (size_t i = 0; i < n; i++) {
            buf[i] = rng64() & 0xff;
        }
        emit_jhash(0, buf, n, k % 3 == 0 ? 0 : rng32());
    }
    /* All-ones bytes. */
    for (size_t i = 0; i < 24; i++) {
        buf[i] = 0xff;
    }
    emit_jhash(0, buf, 12, 0);
    emit_jhash(0, buf, 24, UINT32_MAX);
    printf("\n  ],\n  \"verify_port\": [");

    static const uint64_t dpids[] = {0, 1, 2, 3, UINT64_MAX, 0x0000000000000100ULL,
                                     0x00000000deadbeefULL};
    static const uint32_t ports[] = {0, 1, 2, 0xfffffffe, 0xffffffff, 0xfffffff8};
    first = 1;
    for (size_t d = 0; d < sizeof dpids / sizeof *dpids; d++) {
        for (size_t p = 0; p < sizeof ports / sizeof *ports; p++) {
            emit_port(first, dpids[d], ports[p], 0);
            first = 0;
        }
    }
    for (int k = 0; k < 40; k++) {
        uint64_t dpid = k % 4 == 0 ? rng64() % 16 : rng64();
        uint32_t port = k % 3 == 0 ? rng32() % 64 : rng32();
        uint32_t before = k % 5 == 0 ? 0 : rng32();
        emit_port(0, dpid, port, before);
    }
    emit_port(0, UINT64_MAX, 0xffffffff, UINT32_MAX);
    printf("\n  ],\n  \"verify_rule\": [");

    first = 1;
    emit_rule(first, 0, 0, 0, 0, 0, 1);
    first = 0;
    emit_rule(0, 0, 0, 0, 0, 0, 0);
    emit_rule(0, UINT64_MAX, 255, 65535, UINT64_MAX, UINT32_MAX, 0xffff);
    emit_rule(0, 1, 0, 32768, 0, 0, 1);
    emit_rule(0, 1, 0, 100, 0, 7, 1);
    emit_rule(0, 1, 0, 100, 0, 0, 1);
    emit_rule(0, 2, 0, 100, UINT64_MAX, 0, 1);
    emit_rule(0, 3, 254, 0, 0x0123456789abcdefULL, UINT32_MAX, 1);
    emit_rule(0, UINT64_MAX, 0, 1, 0, 0, 1);
    emit_rule(0, 1, 1, 65535, 0, 1, 0x1d0f);
    for (int k = 0; k < 50; k++) {
        uint64_t dpid = k % 4 == 0 ? rng64() % 16 : rng64();
        uint8_t table = k % 2 ? rng32() % 4 : rng32() & 0xff;
        uint16_t prio = k % 3 ? rng32() & 0xffff : 32768;
        uint64_t cookie = k % 5 == 0 ? 0 : (k % 5 == 1 ? UINT64_MAX : rng64());
        uint32_t rule_id = k % 7 == 0 ? 0 : (k % 7 == 1 ? UINT32_MAX : rng32());
        uint16_t before = k % 6 == 0 ? 1 : rng32() & 0xffff;
        emit_rule(0, dpid, table, prio, cookie, rule_id, before);
    }
    printf("\n  ]\n}\n");
    return 0;
}

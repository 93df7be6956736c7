/*
 * The table of wire messages (common/messages.def) against the bytes: every
 * message of the table round-trips field by field (the fields as the table
 * lists them), and its frame is byte for byte the one captured from the
 * hand-written encoder before the table existed (GOLDEN below, made by
 * filling each message's union with a byte pattern, the fill() here).
 * Also: who sends what and where the scheduler accepts it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

/* The pattern: union byte i is i * 7 + type; strings short; CTL_REPLY's
 * text out of the union. */
static void fill(struct nvs_msg *m, uint16_t type)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	m->seq = 0x01020304u + type;
	unsigned char *p = (unsigned char *)&m->u;
	for (size_t i = 0; i < sizeof m->u; i++)
		p[i] = (unsigned char)(i * 7 + type);
	if (type == NVS_MSG_HELLO)
		snprintf(m->u.hello.name, sizeof m->u.hello.name, "name-%u", type);
	if (type == NVS_MSG_ATTACH_GPU)
		snprintf(m->u.attach.uuid, sizeof m->u.attach.uuid, "GPU-%u", type);
	if (type == NVS_MSG_CTL_REPLY) {
		m->reply_status = -13;
		m->reply_text = "reply";
		m->reply_len = 5;
	}
}

/* Frames of the encoder before messages.def (commit cb4cae7's protocol.c). */
static const struct {
	uint16_t type;
	const char *hex;
} GOLDEN[] = {
    {NVS_MSG_HELLO,
     "4e565348010001001c0000000503020101080f161d242b323940474e71787f868d949ba206006e616d652d31"},
    {NVS_MSG_ATTACH_GPU,
     "4e565348010002001b00000006030201020910173a41484f565d646b727980878e959ca305004750552d32"},
    {NVS_MSG_REQ_LOCK, "4e565348010003000800000007030201030a11181f262d34"},
    {NVS_MSG_LOCK_RELEASED, "4e565348010004001000000008030201040b121920272e353c434a51585f666d"},
    {NVS_MSG_MEM_UPDATE, "4e565348010005000c00000009030201050c131a3d444b525960676e"},
    {NVS_MSG_SWAP_STATS, "4e56534801000600240000000a030201060d141b3e454c535a61686f767d848b9299a0a7a"
			 "eb5bcc3cad1d8dfe6edf4fb02091017"},
    {NVS_MSG_PING, "4e56534801000700080000000b030201070e151c232a3138"},
    {NVS_MSG_LIMITS_IN_FORCE, "4e56534801000800100000000c030201080f161d242b323940474e555c636a71"},
    {NVS_MSG_UNGATED, "4e56534801000900100000000d0302010910171e252c333a41484f565d646b72"},
    {NVS_MSG_SWAP_PATHS, "4e56534801000a00300000000e0302010a11181f262d343b424950575e656c737a81888f9"
			 "69da4abb2b9c0c7ced5dce3eaf1f8ff060d141b222930373e454c53"},
    {NVS_MSG_LOCK_OK, "4e565348010020000c0000002403020120272e353c434a51585f666d"},
    {NVS_MSG_DROP_LOCK, "4e565348010021000c0000002503020121282f363d444b525960676e"},
    {NVS_MSG_GPU_MODE, "4e565348010022000800000026030201222930373e454c53"},
    {NVS_MSG_SET_LIMITS, "4e565348010023001000000027030201232a31383f464d545b626970777e858c"},
    {NVS_MSG_WAITERS, "4e565348010024000800000028030201242b323940474e55"},
    {NVS_MSG_WELCOME, "4e565348010025000800000029030201252c333a41484f56"},
    {NVS_MSG_SWAP_HINT, "4e56534801002600080000002a030201262d343b42495057"},
    {NVS_MSG_PONG, "4e56534801002700080000002b030201272e353c434a5158"},
    {NVS_MSG_LIMITS_ASK, "4e56534801002800080000002c030201282f363d444b5259"},
    {NVS_MSG_MEMORY_MODE, "4e56534801002900080000002d0302012930373e454c535a"},
    {NVS_MSG_UNGATED_ASK, "4e56534801002a00080000002e0302012a31383f464d545b"},
    {NVS_MSG_SWAP_PATHS_OK, "4e56534801002b00080000002f0302012b323940474e555c"},
    {NVS_MSG_CTL_SET, "4e56534801004000100000004403020140474e555c636a71787f868d949ba2a9"},
    {NVS_MSG_CTL_SET_CLIENT,
     "4e56534801004100180000004503020141484f565d646b727980878e959ca3aab1b8bfc6cdd4dbe2"},
    {NVS_MSG_CTL_STATUS, "4e56534801004200040000004603020142495057"},
    {NVS_MSG_CTL_REPLY, "4e565348010060000d00000064030201f3ffffff050000007265706c79"},
};

static void to_hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

static void test_bytes_as_before(void **state)
{
	(void)state;
	size_t rows = 0;
#define NVS_MESSAGE(name, type, from, on, layout) rows++;
#include "messages.def"
	assert_int_equal(sizeof GOLDEN / sizeof GOLDEN[0], rows);
	for (size_t i = 0; i < sizeof GOLDEN / sizeof GOLDEN[0]; i++) {
		struct nvs_msg m;
		uint8_t buf[4096];
		char hex[2 * sizeof buf + 1];
		fill(&m, GOLDEN[i].type);
		size_t n = nvs_msg_encode(&m, buf, sizeof buf);
		assert_true(n >= NVS_HEADER_SIZE);
		to_hex(buf, n, hex);
		if (strcmp(hex, GOLDEN[i].hex))
			print_error("%s: %s\n  want %s\n", nvs_msg_type_name(GOLDEN[i].type), hex,
				    GOLDEN[i].hex);
		assert_string_equal(hex, GOLDEN[i].hex);
	}
}

/* Every row: encode, decode, the same fields back (as the table lists
 * them), and the same bytes again. */
#define NVS_U32(f) assert_true(b->f == a->f);
#define NVS_I32(f) assert_true(b->f == a->f);
#define NVS_U64(f) assert_true(b->f == a->f);
#define NVS_STR(f) assert_string_equal(b->f, a->f);
#define NVS_LAYOUT(member, type, fields)                                                           \
	static void same_##member(const struct nvs_msg *m, const struct nvs_msg *o)                \
	{                                                                                          \
		const type *a = &m->u.member, *b = &o->u.member;                                   \
		fields                                                                             \
	}
#include "messages.def"
#undef NVS_U32
#undef NVS_I32
#undef NVS_U64
#undef NVS_STR

static void same_reply(const struct nvs_msg *m, const struct nvs_msg *o)
{
	assert_int_equal(o->reply_status, m->reply_status);
	assert_int_equal(o->reply_len, m->reply_len);
	assert_memory_equal(o->reply_text, m->reply_text, m->reply_len);
}

static void roundtrip(uint16_t type, void (*same)(const struct nvs_msg *, const struct nvs_msg *))
{
	struct nvs_msg m, o;
	uint8_t buf[4096], again[4096];
	fill(&m, type);
	size_t n = nvs_msg_encode(&m, buf, sizeof buf), used = 0;
	assert_true(n >= NVS_HEADER_SIZE);
	assert_int_equal(nvs_msg_decode(buf, n, &o, &used), NVS_DECODE_OK);
	assert_int_equal(used, n);
	assert_int_equal(o.type, type);
	assert_int_equal(o.seq, m.seq);
	same(&m, &o);
	assert_int_equal(nvs_msg_encode(&o, again, sizeof again), n);
	assert_memory_equal(again, buf, n);
}

static void test_every_row_roundtrips(void **state)
{
	(void)state;
#define NVS_MESSAGE(name, type, from, on, layout) roundtrip(NVS_MSG_##name, same_##layout);
#include "messages.def"
}

/* Who may send what: client messages on the client socket only, control
 * requests on the admin socket (status on both), nothing the scheduler
 * sends. */
static void test_senders(void **state)
{
	(void)state;
	unsigned n = 0;
	for (unsigned t = 0; t < 65536; t++) {
		enum nvs_msg_from f = nvs_msg_from(t);
		unsigned on = nvs_msg_accepted_on(t);
		if (f == NVS_FROM_NONE) {
			assert_int_equal(on, 0);
			assert_string_equal(nvs_msg_type_name(t), "UNKNOWN");
			continue;
		}
		n++;
		if (f == NVS_FROM_CLIENT)
			assert_int_equal(on, NVS_ON_CLIENT);
		else if (f == NVS_FROM_SCHED)
			assert_int_equal(on, 0);
		else
			assert_true(on & NVS_ON_ADMIN);
	}
	assert_int_equal(n, sizeof GOLDEN / sizeof GOLDEN[0]);
	assert_int_equal(nvs_msg_accepted_on(NVS_MSG_CTL_STATUS), NVS_ON_ADMIN | NVS_ON_CLIENT);
	assert_int_equal(nvs_msg_accepted_on(NVS_MSG_CTL_SET_CLIENT), NVS_ON_ADMIN);
	assert_int_equal(nvs_msg_from(NVS_MSG_CTL_REPLY), NVS_FROM_SCHED);
	assert_string_equal(nvs_msg_type_name(NVS_MSG_LIMITS_IN_FORCE), "LIMITS_IN_FORCE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bytes_as_before),
	    cmocka_unit_test(test_every_row_roundtrips),
	    cmocka_unit_test(test_senders),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

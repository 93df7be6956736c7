/* Protocol framing: every message type round-trips, and malformed input of
 * every kind is rejected without reading past the buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocol.h"

static size_t roundtrip(const struct nvs_msg *in, struct nvs_msg *out, uint8_t *buf, size_t cap)
{
	size_t n = nvs_msg_encode(in, buf, cap);
	assert_true(n >= NVS_HEADER_SIZE);
	size_t used = 0;
	assert_int_equal(nvs_msg_decode(buf, n, out, &used), NVS_DECODE_OK);
	assert_int_equal(used, n);
	assert_int_equal(out->type, in->type);
	assert_int_equal(out->seq, in->seq);
	return n;
}

static void test_hello_roundtrip(void **state)
{
	(void)state;
	uint8_t buf[1024];
	struct nvs_msg m = {.type = NVS_MSG_HELLO, .seq = 7}, o;
	m.u.hello.client_pid = 4242;
	m.u.hello.core_limit = 30;
	m.u.hello.mem_limit = 4ull << 30;
	strcpy(m.u.hello.name, "python3 train.py");
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.u.hello.client_pid, 4242);
	assert_int_equal(o.u.hello.core_limit, 30);
	assert_true(o.u.hello.mem_limit == (4ull << 30));
	assert_string_equal(o.u.hello.name, "python3 train.py");
}

static void test_every_type_roundtrips(void **state)
{
	(void)state;
	static const uint16_t types[] = {
	    NVS_MSG_HELLO,	   NVS_MSG_ATTACH_GPU,	    NVS_MSG_REQ_LOCK,
	    NVS_MSG_LOCK_RELEASED, NVS_MSG_MEM_UPDATE,	    NVS_MSG_SWAP_STATS,
	    NVS_MSG_LOCK_OK,	   NVS_MSG_DROP_LOCK,	    NVS_MSG_GPU_MODE,
	    NVS_MSG_SET_LIMITS,	   NVS_MSG_WAITERS,	    NVS_MSG_WELCOME,
	    NVS_MSG_SWAP_HINT,	   NVS_MSG_CTL_SET,	    NVS_MSG_CTL_SET_CLIENT,
	    NVS_MSG_CTL_STATUS,	   NVS_MSG_CTL_REPLY,	    NVS_MSG_PING,
	    NVS_MSG_PONG,	   NVS_MSG_LIMITS_IN_FORCE, NVS_MSG_LIMITS_ASK,
	    NVS_MSG_MEMORY_MODE,
	};
	uint8_t buf[2048];
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		struct nvs_msg m, o;
		memset(&m, 0, sizeof m);
		m.type = types[i];
		m.seq = (uint32_t)i;
		/* Fill the union with a recognisable pattern; strings stay
		 * short and terminated. */
		memset(&m.u, 0x5a, sizeof m.u);
		m.u.hello.name[10] = '\0';
		m.u.attach.uuid[20] = '\0';
		m.reply_text = "{\"ok\":true}";
		m.reply_len = 11;
		m.reply_status = -1;
		roundtrip(&m, &o, buf, sizeof buf);
		assert_string_not_equal(nvs_msg_type_name(types[i]), "UNKNOWN");
	}
}

static void test_attach_and_limits(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct nvs_msg m = {.type = NVS_MSG_ATTACH_GPU}, o;
	m.u.attach.local_gpu = 3;
	m.u.attach.total_mem = 141ull << 30;
	m.u.attach.allocated = 123456789;
	strcpy(m.u.attach.uuid, "GPU-5e1f0000-0000-4000-8000-000000000003");
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.u.attach.local_gpu, 3);
	assert_true(o.u.attach.total_mem == (141ull << 30));
	assert_true(o.u.attach.allocated == 123456789);
	assert_string_equal(o.u.attach.uuid, m.u.attach.uuid);

	struct nvs_msg l = {.type = NVS_MSG_SET_LIMITS}, lo;
	l.u.limits.local_gpu = 1;
	l.u.limits.core_limit = 25;
	l.u.limits.mem_limit = NVS_NO_LIMIT;
	roundtrip(&l, &lo, buf, sizeof buf);
	assert_true(lo.u.limits.mem_limit == NVS_NO_LIMIT);
	assert_int_equal(lo.u.limits.core_limit, 25);

	struct nvs_msg c = {.type = NVS_MSG_CTL_SET}, co;
	c.u.ctl_set.gpu = -1;
	c.u.ctl_set.field = NVS_CTL_TQ_MS;
	c.u.ctl_set.value = 30000;
	roundtrip(&c, &co, buf, sizeof buf);
	assert_int_equal(co.u.ctl_set.gpu, -1);
	assert_true(co.u.ctl_set.value == 30000);
}

static void test_reply_text(void **state)
{
	(void)state;
	uint8_t buf[256];
	struct nvs_msg m = {.type = NVS_MSG_CTL_REPLY}, o;
	m.reply_status = -13;
	m.reply_text = "permission denied";
	m.reply_len = (uint32_t)strlen(m.reply_text);
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.reply_status, -13);
	assert_int_equal(o.reply_len, m.reply_len);
	assert_memory_equal(o.reply_text, "permission denied", o.reply_len);
	/* Too small a buffer: encode refuses instead of truncating. */
	assert_int_equal(nvs_msg_encode(&m, buf, 20), 0);
}

static void test_partial_frames_need_more(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct nvs_msg m = {.type = NVS_MSG_HELLO}, o;
	strcpy(m.u.hello.name, "x");
	size_t n = nvs_msg_encode(&m, buf, sizeof buf);
	size_t used;
	for (size_t k = 0; k < n; k++)
		assert_int_equal(nvs_msg_decode(buf, k, &o, &used), NVS_DECODE_NEED_MORE);
	assert_int_equal(nvs_msg_decode(buf, n, &o, &used), NVS_DECODE_OK);
}

static void test_two_frames_in_one_buffer(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct nvs_msg a = {.type = NVS_MSG_REQ_LOCK}, b = {.type = NVS_MSG_MEM_UPDATE}, o;
	a.u.gpu.local_gpu = 1;
	b.u.mem.allocated = 99;
	size_t na = nvs_msg_encode(&a, buf, sizeof buf);
	size_t nb = nvs_msg_encode(&b, buf + na, sizeof buf - na);
	size_t used;
	assert_int_equal(nvs_msg_decode(buf, na + nb, &o, &used), NVS_DECODE_OK);
	assert_int_equal(used, na);
	assert_int_equal(o.type, NVS_MSG_REQ_LOCK);
	assert_int_equal(nvs_msg_decode(buf + na, nb, &o, &used), NVS_DECODE_OK);
	assert_true(o.u.mem.allocated == 99);
}

static void test_malformed_rejected(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct nvs_msg m = {.type = NVS_MSG_LOCK_OK}, o;
	size_t n = nvs_msg_encode(&m, buf, sizeof buf), used;

	uint8_t bad[512];
	/* Bad magic, even before a full header arrived. */
	memcpy(bad, buf, n);
	bad[0] = 'X';
	assert_int_equal(nvs_msg_decode(bad, 2, &o, &used), NVS_DECODE_BAD);
	assert_int_equal(nvs_msg_decode(bad, n, &o, &used), NVS_DECODE_BAD);
	/* Wrong version. */
	memcpy(bad, buf, n);
	bad[4] = 99;
	assert_int_equal(nvs_msg_decode(bad, n, &o, &used), NVS_DECODE_BAD);
	/* Unknown type. */
	memcpy(bad, buf, n);
	bad[6] = 200;
	assert_int_equal(nvs_msg_decode(bad, n, &o, &used), NVS_DECODE_BAD);
	/* Huge length is refused at once, not waited for. */
	memcpy(bad, buf, n);
	bad[8] = 0xff, bad[9] = 0xff, bad[10] = 0xff, bad[11] = 0x7f;
	assert_int_equal(nvs_msg_decode(bad, n, &o, &used), NVS_DECODE_BAD);
	/* Payload longer than the type's layout (trailing bytes). */
	memcpy(bad, buf, n);
	bad[n] = 0;
	bad[8] = (uint8_t)(bad[8] + 1);
	assert_int_equal(nvs_msg_decode(bad, n + 1, &o, &used), NVS_DECODE_BAD);
	/* Payload shorter than the layout. */
	memcpy(bad, buf, n);
	bad[8] = (uint8_t)(bad[8] - 1);
	assert_int_equal(nvs_msg_decode(bad, n - 1, &o, &used), NVS_DECODE_BAD);
}

static void test_string_bounds(void **state)
{
	(void)state;
	uint8_t buf[1024];
	struct nvs_msg m = {.type = NVS_MSG_ATTACH_GPU}, o;
	strcpy(m.u.attach.uuid, "GPU-1");
	size_t n = nvs_msg_encode(&m, buf, sizeof buf), used;
	/* The uuid string length field sits after 4+8+8 payload bytes; claim a
	 * length longer than the frame. */
	uint8_t *len = buf + NVS_HEADER_SIZE + 20;
	len[0] = 200;
	assert_int_equal(nvs_msg_decode(buf, n, &o, &used), NVS_DECODE_BAD);
	/* A string that does not fit the destination is rejected, not cut. */
	uint8_t big[NVS_HEADER_SIZE + 22 + 200];
	memcpy(big, buf, NVS_HEADER_SIZE + 20);
	uint32_t plen = 22 + 200;
	big[8] = (uint8_t)plen, big[9] = (uint8_t)(plen >> 8), big[10] = 0, big[11] = 0;
	big[NVS_HEADER_SIZE + 20] = 200;
	big[NVS_HEADER_SIZE + 21] = 0;
	memset(big + NVS_HEADER_SIZE + 22, 'a', 200);
	assert_int_equal(nvs_msg_decode(big, sizeof big, &o, &used), NVS_DECODE_BAD);
	/* An embedded NUL is rejected. */
	len[0] = 5;
	buf[NVS_HEADER_SIZE + 22 + 2] = '\0';
	assert_int_equal(nvs_msg_decode(buf, n, &o, &used), NVS_DECODE_BAD);
}

static void test_random_bytes_never_crash(void **state)
{
	(void)state;
	uint8_t buf[256];
	struct nvs_msg o;
	size_t used;
	srand(12345);
	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)(rand() % (int)sizeof buf);
		for (size_t k = 0; k < n; k++)
			buf[k] = (uint8_t)rand();
		if (i % 2 && n >= 4)
			memcpy(buf, "NVSH\x01\x00", n >= 6 ? 6 : 4);
		enum nvs_decode_result r = nvs_msg_decode(buf, n, &o, &used);
		if (r == NVS_DECODE_OK)
			assert_true(used <= n);
	}
}

static void test_registration_builders(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct nvs_msg m, o;
	nvs_msg_hello(&m, "train.py", 30, 4ull << 30);
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.type, NVS_MSG_HELLO);
	assert_int_equal(o.u.hello.client_pid, (uint32_t)getpid());
	assert_int_equal(o.u.hello.core_limit, 30);
	assert_true(o.u.hello.mem_limit == (4ull << 30));
	assert_string_equal(o.u.hello.name, "train.py");
	nvs_msg_attach(&m, 2, "GPU-abc", 16ull << 30, 123);
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.type, NVS_MSG_ATTACH_GPU);
	assert_int_equal(o.u.attach.local_gpu, 2);
	assert_true(o.u.attach.total_mem == (16ull << 30) && o.u.attach.allocated == 123);
	assert_string_equal(o.u.attach.uuid, "GPU-abc");
}

static void test_lock_builders(void **state)
{
	(void)state;
	uint8_t buf[512];
	struct nvs_msg m, o;
	nvs_msg_gpu(&m, NVS_MSG_SWAP_HINT, 3, 160);
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.type, NVS_MSG_SWAP_HINT);
	assert_int_equal(o.u.gpu.local_gpu, 3);
	assert_int_equal(o.u.gpu.value, 160);
	nvs_msg_released(&m, 1, NVS_RELEASED_IDLE | (160u << NVS_DROP_SWAP_MIB_SHIFT), 12345);
	roundtrip(&m, &o, buf, sizeof buf);
	assert_int_equal(o.type, NVS_MSG_LOCK_RELEASED);
	assert_int_equal(o.u.released.local_gpu, 1);
	assert_int_equal(o.u.released.flags >> NVS_DROP_SWAP_MIB_SHIFT, 160);
	assert_int_equal(o.u.released.flags & NVS_RELEASED_IDLE, 1);
	assert_true(o.u.released.drain_ns == 12345);
	/* The MiB fields: rounded up, clamped to what the field holds. */
	assert_int_equal(nvs_swap_mib(0), 0);
	assert_int_equal(nvs_swap_mib(1), 1);
	assert_int_equal(nvs_swap_mib(1u << 20), 1);
	assert_int_equal(nvs_swap_mib((1u << 20) + 1), 2);
	assert_int_equal(nvs_swap_mib(UINT64_MAX), NVS_DROP_SWAP_MIB_MAX);
}

static void test_mode_names(void **state)
{
	(void)state;
	assert_int_equal(nvs_mode_parse("on"), NVS_MODE_ON);
	assert_int_equal(nvs_mode_parse("OFF"), NVS_MODE_OFF);
	assert_int_equal(nvs_mode_parse("auto"), NVS_MODE_AUTO);
	assert_int_equal(nvs_mode_parse("maybe"), -1);
	assert_string_equal(nvs_mode_name(NVS_MODE_AUTO), "auto");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hello_roundtrip),
	    cmocka_unit_test(test_every_type_roundtrips),
	    cmocka_unit_test(test_attach_and_limits),
	    cmocka_unit_test(test_reply_text),
	    cmocka_unit_test(test_partial_frames_need_more),
	    cmocka_unit_test(test_two_frames_in_one_buffer),
	    cmocka_unit_test(test_malformed_rejected),
	    cmocka_unit_test(test_string_bounds),
	    cmocka_unit_test(test_random_bytes_never_crash),
	    cmocka_unit_test(test_registration_builders),
	    cmocka_unit_test(test_lock_builders),
	    cmocka_unit_test(test_mode_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
